/* Plumbing shared by the cony elements. */
#include "gstconyelement.h"

GstStateChangeReturn
gst_cony_element_change_state (GstElement *element, GstStateChange transition,
    GstElementClass *parent_class, GstConyStartFunc start, GstConyStopFunc stop)
{
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && !start (element))
    return GST_STATE_CHANGE_FAILURE;

  GstStateChangeReturn ret = parent_class->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
      stop (element);
    return ret;
  }
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY)
    stop (element);
  return ret;
}

gboolean
gst_cony_element_query_latency (GstElement *element, GstPad *sinkpad, GstQuery *query,
    GstClockTime own)
{
  gboolean live;
  GstClockTime min, max;

  if (!gst_pad_peer_query (sinkpad, query))
    return FALSE;
  if (!GST_CLOCK_TIME_IS_VALID (own)) {
    GST_DEBUG_OBJECT (element, "latency queried before the element's delay is known");
    return TRUE;
  }
  gst_query_parse_latency (query, &live, &min, &max);
  GST_DEBUG_OBJECT (element, "upstream latency %" GST_TIME_FORMAT "-%" GST_TIME_FORMAT
      ", adding %" GST_TIME_FORMAT, GST_TIME_ARGS (min), GST_TIME_ARGS (max), GST_TIME_ARGS (own));
  min += own;
  if (GST_CLOCK_TIME_IS_VALID (max))
    max += own;
  gst_query_set_latency (query, live, min, max);
  return TRUE;
}

gboolean
gst_cony_element_property_settable (GObject *object, GParamSpec *pspec)
{
  GstElement *element = GST_ELEMENT (object);
  GstState state, pending;

  if (!(pspec->flags & GST_PARAM_MUTABLE_READY))
    return TRUE;
  GST_OBJECT_LOCK (element);
  state = GST_STATE (element);
  pending = GST_STATE_PENDING (element);
  GST_OBJECT_UNLOCK (element);
  if (state <= GST_STATE_READY && pending <= GST_STATE_READY)
    return TRUE;
  GST_WARNING_OBJECT (element, "property '%s' can only be changed in the NULL or READY state "
      "(the element is %s): the change is ignored, the old value stays in use",
      pspec->name, gst_element_state_get_name (MAX (state, pending)));
  return FALSE;
}
