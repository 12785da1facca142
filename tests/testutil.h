/* Helpers shared by the test programs. */
#pragma once
#include "cony/cnn.h"
#include "cony/npy.h"

#include <glib.h>

/* $CONY_SOURCE_ROOT/tests/golden/@area/@file (the tests run with CONY_SOURCE_ROOT set). */
char *cony_test_golden_path (const char *area, const char *file);
/* $CONY_SOURCE_ROOT/models/@dir/@file: a shipped model. */
char *cony_test_model_path (const char *dir, const char *file);
/* Loads a golden .npy, failing the test when it cannot. */
ConyNpyArray *cony_test_load_golden_npy (const char *area, const char *file);
/* max |got − want| / max |want| (the plain maximum difference when want is all zero). */
double cony_test_rel_err (const float *got, const float *want, gsize n);
/* A copy of the F32 safetensors file @src in a temporary file, its metadata replaced by
 * @meta (key, value, ..., NULL). Returns its path (g_free; the caller unlinks it). */
char *cony_test_copy_safetensors (const char *src, const char *const *meta);
/* A copy of the safetensors file @src (any dtypes) in a temporary file, its header (a
 * JSON object) and tensor bytes changed by @edit (the data: the bytes after the header,
 * where the header's data_offsets count from). Returns its path (g_free; the caller
 * unlinks it). */
typedef struct _JsonObject JsonObject;
typedef void (*ConyTestSafetensorsEdit) (JsonObject *header, char *data, gpointer user);
char *cony_test_edit_safetensors (const char *src, ConyTestSafetensorsEdit edit, gpointer user);
/* A copy of the safetensors file @src (any dtypes) in a temporary file whose metadata
 * `quantization` is @quant (NULL: none). Returns its path (g_free; the caller unlinks). */
char *cony_test_with_quantization (const char *src, const char *quant);
/* The shipped YAMNet with the activation quantisation of its .tflite
 * (tests/golden/yamnet/quantization.json, what training/convert_tflite.py records): the
 * int8 file, in a temporary file (g_free the path; the caller unlinks). */
char *cony_test_yamnet_int8 (void);
/* Loads the golden CNN model file @area/@file, failing the test when it cannot. */
ConyCnn *cony_test_load_golden_cnn (const char *area, const char *file);
/* Asserts that *@error is CONY_ERROR @code with a message containing @needle1 and
 * @needle2 (either may be NULL), then clears it. */
void cony_test_expect_error (GError **error, int code, const char *needle1, const char *needle2);
/* Asserts that loading the CNN model @path fails with CONY_ERROR @code and a message
 * naming @path and containing @needle1 and @needle2 (either may be NULL). */
void cony_test_expect_cnn_refused (const char *path, int code, const char *needle1,
    const char *needle2);
/* Removes the flat temporary directory @dir and the files in it; FALSE if anything
 * stayed. */
gboolean cony_test_remove_tmpdir (const char *dir);
/* Runs the current test again in a subprocess with CONY_CNN_PORTABLE=1 (the kernels
 * of CPUs without AVX2/F16C) and asserts that it passed; the test does its checks
 * when g_test_subprocess() is TRUE. */
void cony_test_trap_portable_cnn (void);
/* The same with CONY_CNN_KERNELS=@name (the int8 CNN's kernel set, src/kernels/qkernels.h). */
void cony_test_trap_cnn_kernels (const char *name);
/* max |got − want| / max(max |want|, 1e-3), failing the test on a got that is not
 * finite: relative where the output is of ordinary size, absolute where it is tiny. */
double cony_test_rel_err_floor (const float *got, const float *want, gsize n);
/* @n floats uniform in [@lo, @hi) from @seed (g_free): deterministic test data. */
float *cony_test_random_floats (gsize n, double lo, double hi, guint32 seed);
/* Softmax of the @c @logits into @probs (in double, shifted by the maximum); returns the
 * index of the largest logit (the first of equals). */
int cony_test_softmax (const float *logits, int c, double *probs);
/* @count values, each the sum of three uniform draws from [−1, 1) times @sd: near
 * normal, mean 0, standard deviation @sd. */
void cony_test_fill_normal (GRand *rng, float *x, gsize count, double sd);
/* @T tokens of @d such values, from @seed (g_free). */
float *cony_test_normal_tokens (int T, int d, guint32 seed, double sd);
/* @T tokens of @d values that change slowly, from @seed (g_free): per column the sum of
 * three sinusoids with periods drawn from [@min_period, @max_period) tokens and random
 * phases, unit variance. */
float *cony_test_smooth_tokens (int T, int d, guint32 seed, double min_period, double max_period);

/* Memory measured in tests: a field of /proc/self/status in KiB ("VmRSS", "VmHWM": the
 * peak since the last cony_test_reset_peak_rss(), which writes 5 to clear_refs). Not
 * meaningful under AddressSanitizer (its quarantine and shadow keep memory resident):
 * CONY_TEST_CHECK_RSS is 0 there, and LeakSanitizer does the job (scripts/sanitize.sh). */
glong cony_test_status_kib (const char *field);
void cony_test_reset_peak_rss (void);
#if defined(__SANITIZE_ADDRESS__)
#define CONY_TEST_CHECK_RSS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONY_TEST_CHECK_RSS 0
#endif
#endif
#ifndef CONY_TEST_CHECK_RSS
#define CONY_TEST_CHECK_RSS 1
#endif
