/* Two builds of libcony in one process, frame by frame alternately: the image
 * benchmark's before / after on the same load (bench/image_ab.sh builds the two
 * shared objects and this program). Per frame and build: the centre crop + resize of a
 * random 640x480 frame and the network, CPU time of this thread; the builds' order
 * flips every frame. Prints each build's median and best, and the median of the
 * per-frame ratios A / B (same frame, neighbouring in time). Also checks that both
 * builds give the same scores, bit for bit. */
#include <dlfcn.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct _ConyCnn ConyCnn;

typedef struct {
  const char *path;
  ConyCnn *(*load) (const char *, GError **);
  void (*forward) (ConyCnn *, const float *, float *);
  gsize (*in_size) (const ConyCnn *);
  guint (*out_size) (const ConyCnn *);
  void (*resize) (const guint8 *, guint, guint, gsize, guint, int, guint, guint, float *, float *);
  gsize (*scratch) (guint, guint, guint, guint, guint);
  ConyCnn *cnn;
  float *in, *sc, *out;
  double *t_net, *t_rs;
} Lib;

static double
cpu_ms (void)
{
  struct timespec t;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int
cmp_d (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (const double *v, int n)
{
  double *s = g_memdup2 (v, sizeof (double) * n);
  qsort (s, n, sizeof (double), cmp_d);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  g_free (s);
  return m;
}

static void
open_lib (Lib *l, const char *model, int frames)
{
  void *h = dlopen (l->path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (h == NULL) {
    fprintf (stderr, "image_ab: %s\n", dlerror ());
    exit (1);
  }
  *(void **) &l->load = dlsym (h, "cony_cnn_load");
  *(void **) &l->forward = dlsym (h, "cony_cnn_forward");
  *(void **) &l->in_size = dlsym (h, "cony_cnn_get_input_size");
  *(void **) &l->out_size = dlsym (h, "cony_cnn_get_output_size");
  *(void **) &l->resize = dlsym (h, "cony_image_resize");
  *(void **) &l->scratch = dlsym (h, "cony_image_scratch_size");
  GError *error = NULL;
  l->cnn = l->load (model, &error);
  if (l->cnn == NULL) {
    fprintf (stderr, "image_ab: %s: %s\n", l->path, error->message);
    exit (1);
  }
  l->in = g_new (float, l->in_size (l->cnn));
  l->out = g_new (float, l->out_size (l->cnn));
  l->sc = g_new (float, l->scratch (640, 480, 3, 224, 224));
  l->t_net = g_new (double, frames);
  l->t_rs = g_new (double, frames);
}

static void
run (Lib *l, const guint8 *frame, int i)
{
  double c0 = cpu_ms ();
  l->resize (frame, 640, 480, 640 * 3, 3, 1 /* CONY_IMAGE_CROP_CENTER */, 224, 224, l->in, l->sc);
  double c1 = cpu_ms ();
  l->forward (l->cnn, l->in, l->out);
  double c2 = cpu_ms ();
  if (i >= 0) {
    l->t_rs[i] = c1 - c0;
    l->t_net[i] = c2 - c1;
  }
}

int
main (int argc, char **argv)
{
  if (argc < 5) {
    fprintf (stderr, "usage: image_ab A.so B.so MODEL FRAMES\n");
    return 2;
  }
  int frames = atoi (argv[4]);
  Lib lib[2] = { { .path = argv[1] }, { .path = argv[2] } };
  for (int j = 0; j < 2; j++)
    open_lib (&lib[j], argv[3], frames);
  g_autofree guint8 *frame = g_new (guint8, 640 * 480 * 3);
  GRand *rng = g_rand_new_with_seed (40);
  gsize D = lib[0].out_size (lib[0].cnn), same = 0;
  for (int i = -2; i < frames; i++) {
    for (gsize p = 0; p < 640 * 480 * 3; p++)
      frame[p] = (guint8) g_rand_int_range (rng, 0, 256);
    for (int j = 0; j < 2; j++)
      run (&lib[(i + j) & 1], frame, i);
    same += memcmp (lib[0].out, lib[1].out, D * sizeof (float)) == 0;
  }
  g_rand_free (rng);
  double *ratio = g_new (double, frames);
  for (int i = 0; i < frames; i++)
    ratio[i] = lib[0].t_net[i] / lib[1].t_net[i];
  for (int j = 0; j < 2; j++) {
    double best = lib[j].t_net[0];
    for (int i = 1; i < frames; i++)
      best = MIN (best, lib[j].t_net[i]);
    printf ("%s: network %.2f ms median (best %.2f), resize %.3f ms median\n", lib[j].path,
        median (lib[j].t_net, frames), best, median (lib[j].t_rs, frames));
  }
  printf ("network A / B per frame: median %.3f; scores bit-identical on %zu of %d frames\n",
      median (ratio, frames), same, frames + 2);
  return same == (gsize) frames + 2 ? 0 : 1;
}
