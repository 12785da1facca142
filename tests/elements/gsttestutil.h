/* Helpers shared by the GstHarness tests. */
#pragma once
#include <gst/check/gstharness.h>

/* Pushes tokens @from … @from+@n−1 of @x (@dim floats each) in buffers of @k tokens,
 * PTS base + i·step_ns, duration len·step_ns; the first buffer DISCONT when asked. */
void cony_test_push_tokens (GstHarness *h, const float *x, guint dim, gsize from, gsize n, guint k,
    GstClockTime base, GstClockTime step_ns, gboolean discont);

/* Pops the ERROR message from @bus and checks that it is a core negotiation error whose
 * debug text contains each string of the NULL-terminated @needles (NULL: none). */
void cony_test_pop_negotiation_error (GstBus *bus, const char *const *needles);

/* Sends stream-start and caps @caps_string into the harnessed element and checks that
 * they are refused: the element's sink pad has no caps and nothing comes out. The
 * element's messages go to a private bus; with @needles non-NULL the error posted there
 * must be a negotiation error naming them (cony_test_pop_negotiation_error()). Tears @h
 * down. */
void cony_test_assert_caps_refused (GstHarness *h, const char *caps_string,
    const char *const *needles);

/* A GST_PARAM_MUTABLE_READY property (#31.5): with the harnessed element PLAYING,
 * setting @prop to @value (a string as for gst-launch) is refused and the old value
 * reads back; after going to READY the same change takes. Leaves the element in READY. */
/* Upstream offering @caps_string (through a CAPS query with it as the filter, as a source
 * negotiates, when @by_query; else as a CAPS event, as appsrc or a demuxer sends it) gets
 * a CORE/NEGOTIATION error whose message is exactly @message ("conymel takes ..., got ...:
 * add ..."), posted once. Tears @h down. */
void cony_test_assert_caps_named (GstHarness *h, const char *caps_string, gboolean by_query,
    const char *message);
void cony_test_assert_ready_only (GstHarness *h, const char *prop, const char *value);
/* cony_test_assert_ready_only() for each "property", "value" pair of the NULL-terminated
 * @props, each on a fresh harness around a @factory element with "model" @model (NULL:
 * unset) fed @caps_string. */
void cony_test_assert_ready_only_props (const char *factory, const char *model,
    const char *caps_string, const char *const *props);

/* A bus of its own on the harnessed element, to read its messages (the harness has none);
 * cony_test_detach_bus() takes it off and drops it. */
GstBus *cony_test_attach_bus (GstHarness *h);
void cony_test_detach_bus (GstHarness *h, GstBus *bus);

/* A new @factory element with "model" @model (a path; NULL: left unset) and the
 * properties "name", value, ..., NULL (g_object_set()). */
GstElement *cony_test_element_new (const char *factory, const char *model, const gchar *first_prop,
    ...);
GstElement *cony_test_element_new_valist (const char *factory, const char *model,
    const gchar *first_prop, va_list ap);
/* A harness around @el (its "sink" and "src" pads); takes the caller's reference. */
GstHarness *cony_test_harness_take (GstElement *el);
/* cony_test_harness_take (cony_test_element_new (...)). */
GstHarness *cony_test_harness_new (const char *factory, const char *model, const gchar *first_prop,
    ...);
GstHarness *cony_test_harness_new_valist (const char *factory, const char *model,
    const gchar *first_prop, va_list ap);

/* Pops the next @type message (GST_MESSAGE_ERROR or GST_MESSAGE_WARNING) from @bus and
 * asserts that its GError matches @domain and @code (@domain 0: any). Returns the
 * GError (g_error_free); *@debug gets the debug text (g_free) when @debug is non-NULL. */
GError *cony_test_pop_gerror (GstBus *bus, GstMessageType type, GQuark domain, gint code,
    gchar **debug);

/* With a bus of its own, going to PAUSED fails for @el with an ERROR whose message and
 * debug text, joined, contain each string of the NULL-terminated @needles (NULL: none).
 * Leaves @el in NULL without a bus; returns the GError (g_error_free). */
GError *cony_test_assert_start_fails (GstElement *el, const char *const *needles);
/* Going to PAUSED succeeds for @el (a fixed element is reusable); leaves it in NULL. */
void cony_test_assert_starts (GstElement *el);

/* A TIME segment from @start, stream time @time and running time @base into the
 * harnessed element. */
void cony_test_push_segment (GstHarness *h, GstClockTime start, GstClockTime time,
    GstClockTime base);
/* A flush (start, stop resetting time) and a fresh TIME segment into the harnessed
 * element. */
void cony_test_flush (GstHarness *h);
/* Drops every buffer waiting at the harness' sink. */
void cony_test_drop_buffers (GstHarness *h);
/* Pulls every event waiting at the harness' sink; TRUE if one of them was of @type. */
gboolean cony_test_event_forwarded (GstHarness *h, GstEventType type);

/* A packed RGB frame of @width × @height with GStreamer's row padding (each row rounded
 * up to 4 bytes), pixels and padding random from @seed; PTS @pts, duration @dur. */
GstBuffer *cony_test_rgb_frame (guint width, guint height, guint32 seed, GstClockTime pts,
    GstClockTime dur);
