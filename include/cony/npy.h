/* Reading and writing NumPy .npy files (float32, little-endian, C order). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

#define CONY_NPY_MAX_DIMS 8

typedef struct {
  int ndim;
  gsize shape[CONY_NPY_MAX_DIMS];
  float *data; /* owned; g_free() via cony_npy_array_free() */
} ConyNpyArray;

/* Loads a float32 array. Accepts format versions 1.0, 2.0 and 3.0, dtype '<f4'
 * (also '<f8', converted), C order only. Errors name the file and what was wrong. */
ConyNpyArray *cony_npy_load (const char *path, GError **error);
gboolean cony_npy_save (const char *path, const float *data, int ndim, const gsize *shape,
    GError **error);
gsize cony_npy_array_numel (const ConyNpyArray *array);
void cony_npy_array_free (ConyNpyArray *array);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyNpyArray, cony_npy_array_free)

G_END_DECLS
