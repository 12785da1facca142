/* Helpers shared by the `cony bench` subcommands (bench.h). */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static double
clock_s (clockid_t id)
{
  struct timespec ts;
  clock_gettime (id, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double
cony_bench_cpu_s (void)
{
  return clock_s (CLOCK_THREAD_CPUTIME_ID);
}

double
cony_bench_clock_overhead_s (double (*clock) (void))
{
  double best = G_MAXDOUBLE;
  for (int i = 0; i < 200; i++) {
    double t0 = clock ();
    best = MIN (best, clock () - t0);
  }
  return best;
}

double
cony_bench_wall_s (void)
{
  return clock_s (CLOCK_MONOTONIC);
}

void
cony_bench_fill_random (GRand *rng, float *x, gsize n, double centre, double half_width)
{
  for (gsize i = 0; i < n; i++)
    x[i] = (float) (centre + half_width * g_rand_double_range (rng, -1.0, 1.0));
}

void
cony_bench_fill_smooth (GRand *rng, float *x, int T, int d, double min_period, double max_period)
{
  for (int c = 0; c < d; c++) {
    double period[3], phase[3];
    for (int i = 0; i < 3; i++) {
      period[i] = g_rand_double_range (rng, min_period, max_period);
      phase[i] = g_rand_double_range (rng, 0.0, 2 * G_PI);
    }
    for (int t = 0; t < T; t++) {
      double v = 0.0;
      for (int i = 0; i < 3; i++)
        v += sin (2 * G_PI * t / period[i] + phase[i]);
      x[(gsize) t * d + c] = (float) (v / sqrt (1.5));
    }
  }
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

ConyBenchSummary
cony_bench_summarise (const double *samples, int n)
{
  g_autofree double *sorted = g_memdup2 (samples, sizeof (double) * n);
  qsort (sorted, n, sizeof (double), cmp_double);
  return (ConyBenchSummary){ .min = sorted[0], .median = sorted[n / 2] };
}
