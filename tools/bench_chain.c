/* The benchmarks' audio chain (bench_chain.h). */
#include "bench_chain.h"

#include "bench.h"

#include "cony/model.h"

#include <math.h>
#include <string.h>

void
cony_bench_chain_init (ConyBenchChain *c, ConyMel *mel, ConyCnn *cnn, ConyEncoder *enc,
    guint stride, gboolean timed, gboolean keep_tokens)
{
  memset (c, 0, sizeof *c);
  c->mel = mel;
  c->cnn = cnn;
  c->enc = enc;
  c->stride = stride;
  c->timed = timed;
  c->win = cony_cnn_get_input_height (cnn);
  c->n_mels = cony_mel_get_n_mels (mel);
  c->frames = g_new (float, (gsize) c->win * c->n_mels);
  c->frame = g_new (float, c->n_mels);
  c->embedding = g_new (float, cony_cnn_get_output_size (cnn));
  c->logits = g_new (float, 4096);
  c->tokens = keep_tokens ? g_array_new (FALSE, FALSE, sizeof (float)) : NULL;
  cony_mel_reset (mel);
  cony_encoder_reset (enc);
}

void
cony_bench_chain_clear (ConyBenchChain *c)
{
  g_free (c->frames);
  g_free (c->frame);
  g_free (c->embedding);
  g_free (c->logits);
  if (c->tokens)
    g_array_free (c->tokens, TRUE);
  memset (c, 0, sizeof *c);
}

static double
clock_if (const ConyBenchChain *c)
{
  return c->timed ? cony_bench_cpu_s () : 0.0;
}

void
cony_bench_chain_set_continual (ConyBenchChain *c, ConyCnnContinual *co)
{
  ConyCnnContinualGeometry g;
  cony_cnn_continual_get_geometry (co, &g);
  c->co = co;
  c->win = g.time_stride; /* c->frames holds one block */
  c->have = 0;
  g_free (c->frames);
  g_free (c->embedding);
  c->frames = g_new (float, (gsize) c->win * c->n_mels);
  c->embedding = g_new (float,
      cony_cnn_continual_max_tokens (co, c->win) * cony_cnn_get_output_size (c->cnn));
  cony_cnn_continual_reset (co);
}

/* One token (@emb) through the encoder. */
static void
step (ConyBenchChain *c, const float *emb)
{
  double t = clock_if (c);
  cony_encoder_step (c->enc, emb, c->logits);
  c->encoder_s += clock_if (c) - t;
  c->windows++;
  if (c->tokens)
    g_array_append_vals (c->tokens, emb, cony_cnn_get_output_size (c->cnn));
}

/* Continual mode: the frame in c->frame into the block; the block through the
 * continual CNN once full, and its tokens through the encoder. */
static void
continual_frame (ConyBenchChain *c)
{
  memcpy (c->frames + (gsize) c->have * c->n_mels, c->frame, sizeof (float) * c->n_mels);
  if (++c->have < c->win)
    return;
  c->have = 0;
  double t = clock_if (c);
  gsize made = cony_cnn_continual_push (c->co, c->frames, c->win, c->embedding);
  c->cnn_s += clock_if (c) - t;
  for (gsize j = 0; j < made; j++)
    step (c, c->embedding + j * cony_cnn_get_output_size (c->cnn));
}

/* The frames the mel has ready: into the window; a CNN window and an encoder step
 * every stride frames once it is full. */
static void
drain (ConyBenchChain *c)
{
  gsize row = sizeof (float) * c->n_mels;
  while (TRUE) {
    double t1 = clock_if (c);
    gboolean got = cony_mel_pop_frame (c->mel, c->frame);
    c->mel_s += clock_if (c) - t1;
    if (!got)
      return;
    c->n_frames++;
    if (c->co != NULL) {
      continual_frame (c);
      continue;
    }
    /* the window of the last `win` frames, oldest first */
    if (c->have == c->win)
      memmove (c->frames, c->frames + c->n_mels, row * (c->win - 1));
    else
      c->have++;
    memcpy (c->frames + (gsize) (c->have - 1) * c->n_mels, c->frame, row);
    if (c->have < c->win || (c->since++ % c->stride) != 0)
      continue;
    double t2 = clock_if (c);
    cony_cnn_forward (c->cnn, c->frames, c->embedding);
    c->cnn_s += clock_if (c) - t2;
    step (c, c->embedding);
  }
}

void
cony_bench_chain_push (ConyBenchChain *c, const float *x, gsize n)
{
  double t0 = clock_if (c);
  cony_mel_push (c->mel, x, n);
  c->mel_s += clock_if (c) - t0;
  drain (c);
}

float *
cony_bench_audio (gsize n)
{
  float *x = g_new (float, n);
  GRand *rng = g_rand_new_with_seed (5);
  double lp = 0.0;
  for (gsize i = 0; i < n; i++) {
    double t = (double) i / CONY_BENCH_RATE;
    lp = 0.98 * lp + 0.02 * g_rand_double_range (rng, -1.0, 1.0);
    x[i] = (float) (0.3 * sin (2 * G_PI * (200.0 + 40.0 * fmod (t, 10.0)) * t) + 2.0 * lp);
  }
  g_rand_free (rng);
  return x;
}

char *
cony_bench_default_cnn (const char *transformer)
{
  g_autoptr (ConyModel) model = cony_model_load (transformer, NULL);
  const char *name = model && model->config.cnn.name ? model->config.cnn.name
                                                     : "vggish.safetensors";
  g_autofree char *dir = g_path_get_dirname (transformer);
  g_autofree char *parent = g_path_get_dirname (dir);
  char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GDir) siblings = g_dir_open (parent, 0, NULL);
  const char *sib;
  while (!g_file_test (path, G_FILE_TEST_IS_REGULAR) && siblings
      && (sib = g_dir_read_name (siblings))) {
    g_free (path);
    path = g_build_filename (parent, sib, name, NULL);
  }
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) { /* not found: name it where expected */
    g_free (path);
    path = g_build_filename (dir, name, NULL);
  }
  return path;
}
