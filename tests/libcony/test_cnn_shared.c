/* One copy of a CNN's weights per process (include/cony/cnn.h, "Sharing"): loads of
 * one file share, give bit-identical results to each other and to unshared loads,
 * a rewritten file is loaded anew, per-instance settings stay per instance, and
 * threads may load, run and free shared networks at once. */
#include "cony/cnn.h"
#include "cony/error.h"
#include "testutil.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

static char *tmpdir;

static ConyCnn *
load (const char *path, gboolean share)
{
  GError *error = NULL;
  ConyCnn *cnn = share ? cony_cnn_load (path, &error) : cony_cnn_load_private (path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (cnn);
  return cnn;
}

/* Deterministic input for @cnn: @n examples. */
static float *
make_input (const ConyCnn *cnn, gsize n)
{
  gsize len = cony_cnn_get_input_size (cnn) * n;
  float *x = g_new (float, len);
  guint32 s = 12345;
  for (gsize i = 0; i < len; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float) (s >> 8) / (float) (1u << 24) * 2.0f - 1.0f;
  }
  return x;
}

/* The outputs of @n examples, one at a time then batched (both kinds of scratch). */
static float *
run (ConyCnn *cnn, const float *x, gsize n)
{
  gsize d = cony_cnn_get_output_size (cnn), in = cony_cnn_get_input_size (cnn);
  float *out = g_new (float, 2 * n * d);
  for (gsize k = 0; k < n; k++)
    cony_cnn_forward (cnn, x + k * in, out + k * d);
  cony_cnn_forward_batch (cnn, x, n, out + n * d);
  return out;
}

static void
assert_same_outputs (ConyCnn *a, ConyCnn *b, gsize n)
{
  g_assert_cmpuint (cony_cnn_get_output_size (a), ==, cony_cnn_get_output_size (b));
  g_autofree float *x = make_input (a, n);
  g_autofree float *ya = run (a, x, n);
  g_autofree float *yb = run (b, x, n);
  g_assert_cmpmem (ya, 2 * n * cony_cnn_get_output_size (a) * sizeof (float), yb,
      2 * n * cony_cnn_get_output_size (b) * sizeof (float));
}

/* Two loads share one copy; a private load and a load after every user is gone do
 * not; all give the same bits. @path: a VGG-style file (Winograd weights made on
 * first use) or YAMNet (int8 pointwise panels packed on first use). */
static void
check_share (const char *path)
{
  ConyCnn *a = load (path, TRUE);
  ConyCnn *b = load (path, TRUE);
  ConyCnn *p = load (path, FALSE);
  g_assert_true (cony_cnn_shares_weights (a, b));
  g_assert_false (cony_cnn_shares_weights (a, p));
  g_assert_cmpuint (cony_cnn_get_weights_users (a), ==, 2);
  g_assert_cmpuint (cony_cnn_get_weights_users (b), ==, 2);
  g_assert_cmpuint (cony_cnn_get_weights_users (p), ==, 1);
  /* A private load is not found by later loads either. */
  ConyCnn *c = load (path, TRUE);
  g_assert_true (cony_cnn_shares_weights (a, c));
  g_assert_cmpuint (cony_cnn_get_weights_users (a), ==, 3);
  cony_cnn_free (c);
  g_assert_cmpuint (cony_cnn_get_weights_users (a), ==, 2);

  assert_same_outputs (a, b, 3);
  assert_same_outputs (a, p, 3);
  /* b runs on the forms a made on first use. */
  assert_same_outputs (b, p, 3);
  cony_cnn_free (a);
  g_assert_cmpuint (cony_cnn_get_weights_users (b), ==, 1);
  assert_same_outputs (b, p, 2);
  cony_cnn_free (b);
  /* Every user gone: loaded anew. */
  ConyCnn *d = load (path, TRUE);
  g_assert_cmpuint (cony_cnn_get_weights_users (d), ==, 1);
  assert_same_outputs (d, p, 2);
  cony_cnn_free (d);
  cony_cnn_free (p);
}

static void
test_share_vgg (void)
{
  g_autofree char *path = cony_test_golden_path ("cnn", "small.safetensors");
  check_share (path);
}

static void
test_share_yamnet (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "yamnet",
      "yamnet.safetensors", NULL);
  check_share (path);
}

/* Output selection, final_relu, the conv algorithm and a PCA of one's own belong
 * to the instance; cony_cnn_set_fc_f16() makes the changed weights private. */
static void
test_settings_per_instance (void)
{
  g_autofree char *path = cony_test_golden_path ("cnn", "small.safetensors");
  g_autoptr (ConyCnn) a = load (path, TRUE);
  g_autoptr (ConyCnn) b = load (path, TRUE);
  g_autoptr (ConyCnn) ref = load (path, FALSE);
  g_autofree float *x = make_input (a, 2);
  g_autofree float *want = run (ref, x, 2);
  gsize bytes = 2 * 2 * cony_cnn_get_output_size (ref) * sizeof (float);

  cony_cnn_set_final_relu (a, TRUE);
  cony_cnn_set_conv_algorithm (a, CONY_CNN_CONV_IM2COL);
  g_assert_false (cony_cnn_get_final_relu (b));
  g_assert_cmpint (cony_cnn_get_conv_algorithm (b), ==, CONY_CNN_CONV_AUTO);
  g_autofree float *yb = run (b, x, 2);
  g_assert_cmpmem (yb, bytes, want, bytes);

  /* A's own PCA (here the same file's) leaves b's in place. */
  GError *error = NULL;
  g_assert_true (cony_cnn_load_pca (a, path, &error));
  g_assert_no_error (error);
  g_assert_true (cony_cnn_has_pca (b));

  /* F16 FC weights: a gets a private copy; b and later loads keep the F32 ones. */
  g_assert_true (cony_cnn_set_fc_f16 (a, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (cony_cnn_get_fc_f16 (a));
  g_assert_false (cony_cnn_get_fc_f16 (b));
  g_assert_false (cony_cnn_shares_weights (a, b));
  g_assert_cmpuint (cony_cnn_get_weights_users (a), ==, 1);
  g_assert_cmpuint (cony_cnn_get_weights_users (b), ==, 1);
  g_autoptr (ConyCnn) c = load (path, TRUE);
  g_assert_true (cony_cnn_shares_weights (b, c));
  g_assert_false (cony_cnn_get_fc_f16 (c));
  g_free (yb);
  yb = run (b, x, 2);
  g_assert_cmpmem (yb, bytes, want, bytes);
  g_autofree float *yc = run (c, x, 2);
  g_assert_cmpmem (yc, bytes, want, bytes);

  /* The sole user changes its weights in place, and they leave the registry. */
  g_assert_true (cony_cnn_set_fc_f16 (c, FALSE, &error)); /* nothing to change: still shared */
  g_assert_true (cony_cnn_shares_weights (b, c));
  g_clear_pointer (&c, cony_cnn_free);
  g_assert_true (cony_cnn_set_fc_f16 (b, TRUE, &error));
  g_autoptr (ConyCnn) d = load (path, TRUE);
  g_assert_false (cony_cnn_shares_weights (b, d));
  g_assert_false (cony_cnn_get_fc_f16 (d));
}

static char *
read_all (const char *path, gsize *len)
{
  char *data = NULL;
  GError *error = NULL;
  g_assert_true (g_file_get_contents (path, &data, len, &error));
  g_assert_no_error (error);
  return data;
}

static void
set_mtime (const char *path, const struct timespec *t)
{
  struct timespec ts[2] = { *t, *t };
  g_assert_cmpint (utimensat (AT_FDCWD, path, ts, 0), ==, 0);
}

/* A file rewritten under the same path is a new model: rewritten in place (same
 * inode and size, a new mtime) or replaced by a rename (new inode, the old mtime). */
static void
test_rewritten_file (void)
{
  g_autofree char *src = cony_test_golden_path ("cnn", "small.safetensors");
  const char *m1[] = { "input_mean", "0.50", NULL };
  const char *m2[] = { "input_mean", "0.25", NULL };
  g_autofree char *p1 = cony_test_copy_safetensors (src, m1);
  g_autofree char *p2 = cony_test_copy_safetensors (src, m2);
  gsize n1, n2;
  g_autofree char *v1 = read_all (p1, &n1);
  g_autofree char *v2 = read_all (p2, &n2);
  g_assert_cmpuint (n1, ==, n2);
  g_assert_true (memcmp (v1, v2, n1) != 0);
  g_autofree char *path = g_build_filename (tmpdir, "model.safetensors", NULL);
  GError *error = NULL;
  g_assert_true (g_file_set_contents (path, v1, (gssize) n1, &error));
  struct stat sb1;
  g_assert_cmpint (g_stat (path, &sb1), ==, 0);

  g_autoptr (ConyCnn) a = load (path, TRUE);
  g_autoptr (ConyCnn) ref1 = load (p1, FALSE);
  g_autoptr (ConyCnn) ref2 = load (p2, FALSE);

  /* In place. */
  FILE *f = fopen (path, "r+b");
  g_assert_nonnull (f);
  g_assert_cmpuint (fwrite (v2, 1, n2, f), ==, n2);
  fclose (f);
  struct timespec later = sb1.st_mtim;
  later.tv_sec += 2;
  set_mtime (path, &later);
  struct stat sb2;
  g_assert_cmpint (g_stat (path, &sb2), ==, 0);
  g_assert_cmpuint (sb2.st_ino, ==, sb1.st_ino);
  g_autoptr (ConyCnn) b = load (path, TRUE);
  g_assert_false (cony_cnn_shares_weights (a, b));
  g_assert_cmpuint (cony_cnn_get_weights_users (a), ==, 1);
  assert_same_outputs (a, ref1, 2);
  assert_same_outputs (b, ref2, 2);
  g_autoptr (ConyCnn) b2 = load (path, TRUE); /* unchanged since: shared */
  g_assert_true (cony_cnn_shares_weights (b, b2));

  /* Replaced by a rename, the mtime set back to the in-place version's. */
  g_assert_true (g_file_set_contents (path, v1, (gssize) n1, &error));
  set_mtime (path, &sb2.st_mtim);
  struct stat sb3;
  g_assert_cmpint (g_stat (path, &sb3), ==, 0);
  g_assert_cmpuint (sb3.st_ino, !=, sb2.st_ino);
  g_autoptr (ConyCnn) c = load (path, TRUE);
  g_assert_false (cony_cnn_shares_weights (b, c));
  g_assert_false (cony_cnn_shares_weights (a, c));
  assert_same_outputs (c, ref1, 2);
  g_assert_cmpint (g_unlink (path), ==, 0);
  g_assert_cmpint (g_unlink (p1), ==, 0);
  g_assert_cmpint (g_unlink (p2), ==, 0);
}

/* Bad files fail as before, shared or not, every time (nothing registered). */
static void
test_errors_unchanged (void)
{
  g_autofree char *path = g_build_filename (tmpdir, "trunc.safetensors", NULL);
  g_assert_true (g_file_set_contents (path, "\x10\0\0\0\0\0\0\0{\"a\":", 13, NULL));
  const char *paths[] = { path, "/nonexistent/model.safetensors" };
  for (guint i = 0; i < G_N_ELEMENTS (paths); i++) {
    GError *e1 = NULL, *e2 = NULL, *e3 = NULL;
    g_assert_null (cony_cnn_load (paths[i], &e1));
    g_assert_null (cony_cnn_load (paths[i], &e2));
    g_assert_null (cony_cnn_load_private (paths[i], &e3));
    g_assert_nonnull (e1);
    g_assert_nonnull (strstr (e1->message, paths[i]));
    g_assert_error (e2, e1->domain, e1->code);
    g_assert_error (e3, e1->domain, e1->code);
    g_assert_cmpstr (e2->message, ==, e1->message);
    g_assert_cmpstr (e3->message, ==, e1->message);
    g_error_free (e1);
    g_error_free (e2);
    g_error_free (e3);
  }
  g_assert_cmpint (g_unlink (path), ==, 0);
}

/* ---------------------------------------------------------------- threads */

#define N_THREADS 4
#define ROUNDS 3

typedef struct {
  const char *paths[2];
  const float *x[2];
  const float *want[2];
  gsize bytes[2];
  pthread_barrier_t barrier; /* pthread: visible to ThreadSanitizer */
  gint max_users[2];
} Shared;

/* Each round every thread loads both models at once, runs them at once (the
 * first forward of fresh weights makes their derived forms) and frees them; every
 * output must equal the private reference. */
static gpointer
worker (gpointer data)
{
  Shared *s = data;
  gboolean ok = TRUE; /* no early return: the others wait at the barrier */
  for (guint r = 0; r < ROUNDS; r++) {
    pthread_barrier_wait (&s->barrier);
    ConyCnn *cnn[2];
    for (guint m = 0; m < 2; m++)
      cnn[m] = cony_cnn_load (s->paths[m], NULL);
    pthread_barrier_wait (&s->barrier);
    for (guint m = 0; m < 2; m++) {
      if (cnn[m] == NULL) {
        ok = FALSE;
        continue;
      }
      gint users = (gint) cony_cnn_get_weights_users (cnn[m]);
      gint old;
      do
        old = g_atomic_int_get (&s->max_users[m]);
      while (users > old && !g_atomic_int_compare_and_exchange (&s->max_users[m], old, users));
      float *y = run (cnn[m], s->x[m], 1);
      ok &= memcmp (y, s->want[m], s->bytes[m]) == 0;
      g_free (y);
    }
    pthread_barrier_wait (&s->barrier);
    for (guint m = 0; m < 2; m++)
      cony_cnn_free (cnn[m]);
  }
  return GINT_TO_POINTER (ok);
}

static void
test_threads (void)
{
  g_autofree char *vgg = cony_test_golden_path ("cnn", "small.safetensors");
  g_autofree char *yam = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "models", "yamnet",
      "yamnet.safetensors", NULL);
  Shared s = { .paths = { vgg, yam } };
  pthread_barrier_init (&s.barrier, NULL, N_THREADS);
  float *x[2], *want[2];
  for (guint m = 0; m < 2; m++) {
    g_autoptr (ConyCnn) ref = load (s.paths[m], FALSE);
    x[m] = make_input (ref, 1);
    want[m] = run (ref, x[m], 1);
    s.x[m] = x[m];
    s.want[m] = want[m];
    s.bytes[m] = 2 * cony_cnn_get_output_size (ref) * sizeof (float);
  }
  GThread *t[N_THREADS];
  for (guint i = 0; i < N_THREADS; i++)
    t[i] = g_thread_new ("cnn", worker, &s);
  for (guint i = 0; i < N_THREADS; i++)
    g_assert_true (GPOINTER_TO_INT (g_thread_join (t[i])));
  /* Loaded together, they shared: every thread saw all of them on one copy. */
  g_assert_cmpint (s.max_users[0], ==, N_THREADS);
  g_assert_cmpint (s.max_users[1], ==, N_THREADS);
  for (guint m = 0; m < 2; m++) {
    g_free (x[m]);
    g_free (want[m]);
  }
  pthread_barrier_destroy (&s.barrier);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("cony-cnn-shared-XXXXXX", NULL);
  g_test_add_func ("/cnn-shared/vgg", test_share_vgg);
  g_test_add_func ("/cnn-shared/yamnet", test_share_yamnet);
  g_test_add_func ("/cnn-shared/settings-per-instance", test_settings_per_instance);
  g_test_add_func ("/cnn-shared/rewritten-file", test_rewritten_file);
  g_test_add_func ("/cnn-shared/errors-unchanged", test_errors_unchanged);
  g_test_add_func ("/cnn-shared/threads", test_threads);
  int ret = g_test_run ();
  if (!cony_test_remove_tmpdir (tmpdir))
    ret = ret ? ret : 1;
  g_free (tmpdir);
  return ret;
}
