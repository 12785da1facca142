/* Shared by the CNN harnesses: what they do with a network that loaded. */
#pragma once
#include "fuzz.h"
#include "cony/cnn.h"

#include <math.h>

/* Forward passes above this many multiply-adds cost more than the loader itself. */
#define FORWARD_MAX_FLOPS 20000000

/* One example, then the same example twice as a batch; TRUE when every output is
 * finite. */
static gboolean
fuzz_cnn_forward (ConyCnn *cnn)
{
  gsize n_in = cony_cnn_get_input_size (cnn);
  guint n_out = cony_cnn_get_output_size (cnn);
  float *in = g_new0 (float, MAX (2 * n_in, 1));
  float *out = g_new0 (float, MAX (3 * (gsize) n_out, 1));
  for (gsize i = 0; i < n_in; i++)
    in[i] = in[n_in + i] = (float) (i % 7) - 3.0f;
  cony_cnn_forward (cnn, in, out);
  cony_cnn_forward_batch (cnn, in, 2, out + n_out);
  double s = 0;
  gboolean finite = TRUE;
  for (guint i = 0; i < 3 * n_out; i++) {
    s += out[i];
    finite &= isfinite (out[i]) != 0;
  }
  fuzz_use (s);
  g_free (in);
  g_free (out);
  return finite;
}

/* Describes a loaded network and, when small, runs it on its scores and then on its
 * embedding output where it has one (MobileNet's gap); frees it. */
static void
fuzz_cnn_exercise (ConyCnn *cnn)
{
  g_free (cony_cnn_describe (cnn));
  guint64 conv = 0, fc = 0;
  cony_cnn_get_flops (cnn, &conv, &fc);
  if (conv + fc <= FORWARD_MAX_FLOPS) {
    fuzz_cnn_forward (cnn);
    GError *out_error = NULL;
    if (cony_cnn_set_output (cnn, CONY_CNN_OUTPUT_EMBEDDING, &out_error)) {
      g_assert (cony_cnn_get_output_size (cnn) == cony_cnn_get_embedding_size (cnn));
      fuzz_cnn_forward (cnn);
    } else {
      g_assert (cony_cnn_get_embedding_size (cnn) == 0);
      fuzz_check_error (out_error);
    }
  }
  cony_cnn_free (cnn);
}
