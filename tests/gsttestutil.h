/* Helpers shared by the GstHarness tests. */
#pragma once
#include <gst/check/gstharness.h>

/* Pushes tokens @from … @from+@n−1 of @x (@dim floats each) in buffers of @k tokens,
 * PTS base + i·step_ns, duration len·step_ns; the first buffer DISCONT when asked. */
void cony_test_push_tokens (GstHarness *h, const float *x, guint dim, gsize from, gsize n, guint k,
                            GstClockTime base, GstClockTime step_ns, gboolean discont);
