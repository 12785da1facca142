/* Helpers shared by the test programs. */
#pragma once
#include "cony/npy.h"

#include <glib.h>

/* $CONY_SOURCE_ROOT/tests/golden/@area/@file (the tests run with CONY_SOURCE_ROOT set). */
char *cony_test_golden_path (const char *area, const char *file);
/* Loads a golden .npy, failing the test when it cannot. */
ConyNpyArray *cony_test_load_golden_npy (const char *area, const char *file);
/* max |got − want| / max |want| (the plain maximum difference when want is all zero). */
double cony_test_rel_err (const float *got, const float *want, gsize n);
/* A copy of the F32 safetensors file @src in a temporary file, its metadata replaced by
 * @meta (key, value, ..., NULL). Returns its path (g_free; the caller unlinks it). */
char *cony_test_copy_safetensors (const char *src, const char *const *meta);
