#include "gsttestutil.h"

#include <string.h>

void
cony_test_push_tokens (GstHarness *h, const float *x, guint dim, gsize from, gsize n, guint k,
    GstClockTime base, GstClockTime step_ns, gboolean discont)
{
  for (gsize i = 0; i < n; i += k) {
    gsize len = MIN (k, n - i);
    GstBuffer *buf = gst_buffer_new_memdup (x + (from + i) * dim, len * dim * sizeof (float));
    GST_BUFFER_PTS (buf) = base + i * step_ns;
    GST_BUFFER_DURATION (buf) = len * step_ns;
    if (discont && i == 0)
      GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
    g_assert_cmpint (gst_harness_push (h, buf), ==, GST_FLOW_OK);
  }
}

void
cony_test_pop_negotiation_error (GstBus *bus, const char *const *needles)
{
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  g_assert_nonnull (msg);
  GError *err = NULL;
  gchar *dbg = NULL;
  gst_message_parse_error (msg, &err, &dbg);
  g_assert_true (g_error_matches (err, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION));
  for (const char *const *n = needles; n != NULL && *n != NULL; n++)
    g_assert_nonnull (strstr (dbg, *n));
  g_free (dbg);
  g_clear_error (&err);
  gst_message_unref (msg);
}

void
cony_test_assert_caps_refused (GstHarness *h, const char *caps_string, const char *const *needles)
{
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (h->element, bus);
  GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
  gst_pad_push_event (h->srcpad, gst_event_new_stream_start ("test"));
  GstCaps *caps = gst_caps_from_string (caps_string);
  g_assert_nonnull (caps);
  gst_pad_push_event (h->srcpad, gst_event_new_caps (caps));
  gst_caps_unref (caps);
  g_assert_false (gst_pad_has_current_caps (sinkpad));
  g_assert_null (gst_harness_try_pull (h));
  if (needles != NULL)
    cony_test_pop_negotiation_error (bus, needles);
  gst_object_unref (sinkpad);
  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  gst_harness_teardown (h);
}

void
cony_test_assert_ready_only (GstHarness *h, const char *prop, const char *value)
{
  GObject *el = G_OBJECT (h->element);
  GParamSpec *ps = g_object_class_find_property (G_OBJECT_GET_CLASS (el), prop);
  g_assert_nonnull (ps);
  g_assert_true (ps->flags & GST_PARAM_MUTABLE_READY);
  g_assert_cmpint (GST_STATE (h->element), ==, GST_STATE_PLAYING);
  GValue before = G_VALUE_INIT, now = G_VALUE_INIT;
  g_value_init (&before, ps->value_type);
  g_value_init (&now, ps->value_type);
  g_object_get_property (el, prop, &before);
  gst_util_set_object_arg (el, prop, value);
  g_object_get_property (el, prop, &now);
  g_assert_cmpint (gst_value_compare (&before, &now), ==, GST_VALUE_EQUAL);
  g_assert_cmpint (gst_element_set_state (h->element, GST_STATE_READY), ==,
      GST_STATE_CHANGE_SUCCESS);
  gst_util_set_object_arg (el, prop, value);
  g_value_reset (&now);
  g_object_get_property (el, prop, &now);
  g_assert_cmpint (gst_value_compare (&before, &now), !=, GST_VALUE_EQUAL);
  g_value_unset (&before);
  g_value_unset (&now);
}

GstBus *
cony_test_attach_bus (GstHarness *h)
{
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (h->element, bus);
  return bus;
}

void
cony_test_detach_bus (GstHarness *h, GstBus *bus)
{
  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
}
