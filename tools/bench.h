/* What every `cony bench` subcommand measures with: one clock per kind of time, one
 * random fill, one summary of repeated measurements. */
#pragma once
#include <glib.h>

/* CPU seconds of the calling thread: with one BLAS thread, the compute time free of
 * whatever else holds the cores. */
double cony_bench_cpu_s (void);
/* Monotonic wall-clock seconds: about 20 ns a reading where the CPU clock costs 2 µs,
 * so the clock for intervals of a few µs (taking the least or the median of many, which
 * leaves out the ones another process cut into). */
double cony_bench_wall_s (void);
/* What one reading of @clock adds to an interval it brackets (the least of many
 * back-to-back pairs): for cony_bench_cpu_s about 2 µs where reading the thread's CPU
 * clock is a system call (some VMs). */
double cony_bench_clock_overhead_s (double (*clock) (void));

/* @n floats drawn uniformly from [@centre − @half_width, @centre + @half_width). */
void cony_bench_fill_random (GRand *rng, float *x, gsize n, double centre, double half_width);

/* @T tokens of @d values that change slowly: per column, three sinusoids with periods
 * drawn from [@min_period, @max_period) tokens and random phases, unit variance. */
void cony_bench_fill_smooth (GRand *rng, float *x, int T, int d, double min_period,
    double max_period);

/* Repeated measurements of one quantity, summarised. */
typedef struct {
  double min, median;
} ConyBenchSummary;

/* @n ≥ 1 samples (left unchanged); the median of an even count is the upper middle. */
ConyBenchSummary cony_bench_summarise (const double *samples, int n);
