#include "gsttestutil.h"

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
