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

/* For set_property: TRUE when @pspec may be set now. A property flagged
 * GST_PARAM_MUTABLE_READY (a model path, an attention variant, a geometry) is read on
 * READY→PAUSED only, so outside NULL/READY (or on the way out of them) it is refused:
 * a GST_WARNING_OBJECT names it and the state, and the caller keeps the old value, so
 * that reading it back tells what runs. Takes the object lock: call without it. */
gboolean gst_cony_element_property_settable (GObject *object, GParamSpec *pspec);

G_END_DECLS
