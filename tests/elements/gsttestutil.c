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

GError *
cony_test_pop_gerror (GstBus *bus, GstMessageType type, GQuark domain, gint code, gchar **debug)
{
  g_assert_true (type == GST_MESSAGE_ERROR || type == GST_MESSAGE_WARNING);
  GstMessage *msg = gst_bus_pop_filtered (bus, type);
  g_assert_nonnull (msg);
  GError *err = NULL;
  gchar *dbg = NULL;
  if (type == GST_MESSAGE_ERROR)
    gst_message_parse_error (msg, &err, &dbg);
  else
    gst_message_parse_warning (msg, &err, &dbg);
  gst_message_unref (msg);
  g_assert_nonnull (err);
  if (domain != 0)
    g_assert_true (g_error_matches (err, domain, code));
  if (debug != NULL)
    *debug = dbg;
  else
    g_free (dbg);
  return err;
}

void
cony_test_pop_negotiation_error (GstBus *bus, const char *const *needles)
{
  gchar *dbg = NULL;
  GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, GST_CORE_ERROR,
      GST_CORE_ERROR_NEGOTIATION, &dbg);
  for (const char *const *n = needles; n != NULL && *n != NULL; n++)
    g_assert_nonnull (strstr (dbg, *n));
  g_free (dbg);
  g_error_free (err);
}

void
cony_test_assert_caps_refused (GstHarness *h, const char *caps_string, const char *const *needles)
{
  GstBus *bus = cony_test_attach_bus (h);
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
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
}

void
cony_test_assert_caps_named (GstHarness *h, const char *caps_string, gboolean by_query,
    const char *message)
{
  GstBus *bus = cony_test_attach_bus (h);
  GstCaps *caps = gst_caps_from_string (caps_string);
  g_assert_nonnull (caps);
  gst_pad_push_event (h->srcpad, gst_event_new_stream_start ("test"));
  for (guint attempt = 0; attempt < 2; attempt++) { /* upstream asks again: one error */
    if (by_query) {
      GstCaps *answer = gst_pad_peer_query_caps (h->srcpad, caps);
      g_assert_true (gst_caps_is_empty (answer));
      gst_caps_unref (answer);
    } else {
      gst_pad_push_event (h->srcpad, gst_event_new_caps (caps)); /* sticky: stored anyway */
      GstPad *sinkpad = gst_element_get_static_pad (h->element, "sink");
      g_assert_false (gst_pad_has_current_caps (sinkpad));
      gst_object_unref (sinkpad);
    }
  }
  gst_caps_unref (caps);
  GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, GST_CORE_ERROR,
      GST_CORE_ERROR_NEGOTIATION, NULL);
  g_test_message ("%s", err->message);
  g_assert_cmpstr (err->message, ==, message);
  g_error_free (err);
  g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR));
  cony_test_detach_bus (h, bus);
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

GstElement *
cony_test_element_new_valist (const char *factory, const char *model, const gchar *first_prop,
    va_list ap)
{
  GstElement *el = gst_element_factory_make (factory, NULL);
  g_assert_nonnull (el);
  if (model != NULL)
    g_object_set (el, "model", model, NULL);
  if (first_prop != NULL)
    g_object_set_valist (G_OBJECT (el), first_prop, ap);
  return el;
}

GstElement *
cony_test_element_new (const char *factory, const char *model, const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstElement *el = cony_test_element_new_valist (factory, model, first_prop, ap);
  va_end (ap);
  return el;
}

GstHarness *
cony_test_harness_take (GstElement *el)
{
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  return h;
}

GstHarness *
cony_test_harness_new_valist (const char *factory, const char *model, const gchar *first_prop,
    va_list ap)
{
  return cony_test_harness_take (cony_test_element_new_valist (factory, model, first_prop, ap));
}

GstHarness *
cony_test_harness_new (const char *factory, const char *model, const gchar *first_prop, ...)
{
  va_list ap;
  va_start (ap, first_prop);
  GstHarness *h = cony_test_harness_new_valist (factory, model, first_prop, ap);
  va_end (ap);
  return h;
}

GError *
cony_test_assert_start_fails (GstElement *el, const char *const *needles)
{
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (el, bus);
  g_assert_cmpint (gst_element_set_state (el, GST_STATE_PAUSED), ==, GST_STATE_CHANGE_FAILURE);
  gchar *dbg = NULL;
  GError *err = cony_test_pop_gerror (bus, GST_MESSAGE_ERROR, 0, 0, &dbg);
  gchar *all = g_strconcat (err->message, " ", dbg ? dbg : "", NULL);
  for (const char *const *n = needles; n != NULL && *n != NULL; n++)
    if (strstr (all, *n) == NULL)
      g_error ("'%s' not in '%s'", *n, all);
  g_free (all);
  g_free (dbg);
  gst_element_set_state (el, GST_STATE_NULL);
  gst_element_set_bus (el, NULL);
  gst_object_unref (bus);
  return err;
}

void
cony_test_assert_starts (GstElement *el)
{
  g_assert_cmpint (gst_element_set_state (el, GST_STATE_PAUSED), ==, GST_STATE_CHANGE_SUCCESS);
  gst_element_set_state (el, GST_STATE_NULL);
}

void
cony_test_push_segment (GstHarness *h, GstClockTime start, GstClockTime time, GstClockTime base)
{
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  seg.start = start;
  seg.time = time;
  seg.base = base;
  g_assert_true (gst_harness_push_event (h, gst_event_new_segment (&seg)));
}

void
cony_test_flush (GstHarness *h)
{
  g_assert_true (gst_harness_push_event (h, gst_event_new_flush_start ()));
  g_assert_true (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  cony_test_push_segment (h, 0, 0, 0);
}

void
cony_test_drop_buffers (GstHarness *h)
{
  while (gst_harness_buffers_in_queue (h) > 0)
    gst_buffer_unref (gst_harness_pull (h));
}

gboolean
cony_test_event_forwarded (GstHarness *h, GstEventType type)
{
  GstEvent *ev;
  gboolean seen = FALSE;
  while ((ev = gst_harness_try_pull_event (h)) != NULL) {
    seen |= GST_EVENT_TYPE (ev) == type;
    gst_event_unref (ev);
  }
  return seen;
}

void
cony_test_assert_ready_only_props (const char *factory, const char *model, const char *caps_string,
    const char *const *props)
{
  for (const char *const *p = props; p[0] != NULL; p += 2) {
    g_assert_nonnull (p[1]);
    GstHarness *h = cony_test_harness_new (factory, model, NULL);
    gst_harness_set_src_caps_str (h, caps_string);
    cony_test_assert_ready_only (h, p[0], p[1]);
    gst_harness_teardown (h);
  }
}

GstBuffer *
cony_test_rgb_frame (guint width, guint height, guint32 seed, GstClockTime pts, GstClockTime dur)
{
  gsize size = (gsize) GST_ROUND_UP_4 (width * 3) * height;
  guint8 *data = g_malloc (size);
  GRand *r = g_rand_new_with_seed (seed);
  for (gsize i = 0; i < size; i++)
    data[i] = (guint8) g_rand_int_range (r, 0, 256);
  g_rand_free (r);
  GstBuffer *buf = gst_buffer_new_wrapped (data, size);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = dur;
  return buf;
}
