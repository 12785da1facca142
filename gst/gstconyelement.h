/* Plumbing shared by the cony elements (not a public API). */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

typedef gboolean (*GstConyStartFunc) (GstElement *element);
typedef void (*GstConyStopFunc) (GstElement *element);

/* change_state for elements that build their libcony objects on READY→PAUSED (@start
 * posts its own error and returns FALSE to fail the change) and free them on
 * PAUSED→READY, or when the parent class fails the change after a successful start. */
GstStateChangeReturn gst_cony_element_change_state (GstElement *element, GstStateChange transition,
                                                    GstElementClass *parent_class,
                                                    GstConyStartFunc start, GstConyStopFunc stop);

/* Answers a LATENCY query on the source pad: upstream's latency (asked through
 * @sinkpad) plus @own, the element's own delay; GST_CLOCK_TIME_NONE adds nothing (the
 * delay is not known yet). FALSE when upstream does not answer. */
gboolean gst_cony_element_query_latency (GstElement *element, GstPad *sinkpad, GstQuery *query,
                                         GstClockTime own);

G_END_DECLS
