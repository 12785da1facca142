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
void cony_test_assert_ready_only (GstHarness *h, const char *prop, const char *value);

/* A bus of its own on the harnessed element, to read its messages (the harness has none);
 * cony_test_detach_bus() takes it off and drops it. */
GstBus *cony_test_attach_bus (GstHarness *h);
void cony_test_detach_bus (GstHarness *h, GstBus *bus);
