/* Memory-mapped safetensors reader.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON describing each tensor (dtype, shape, [begin, end) data offsets), then
 * the data. Every offset and size is validated against the file before any
 * tensor is handed out, so a lying header cannot make us read out of bounds. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  CONY_DTYPE_F32,
  CONY_DTYPE_F16,
  CONY_DTYPE_F64,
  CONY_DTYPE_I64,
  CONY_DTYPE_I8, /* quantised weights (read with the tensor's own scale) */
  CONY_DTYPE_U8, /* quantised weights with zero points (uint8 asymmetric) */
  CONY_DTYPE_OTHER,
} ConyDType;

typedef struct {
  const char *name;
  ConyDType dtype;
  int ndim;
  gsize shape[8];
  gsize numel;
  const guint8 *data; /* points into the mapping */
  gsize nbytes;
} ConyTensorInfo;

typedef struct _ConySafetensors ConySafetensors;

/* Maps the file @path names; a relative name not found here is looked up in
 * $CONY_MODEL_PATH and the installed models (cony_model_path_find()), and
 * cony_safetensors_path() is then the file it found. */
ConySafetensors *cony_safetensors_open (const char *path, GError **error);
void cony_safetensors_close (ConySafetensors *st);
const char *cony_safetensors_path (const ConySafetensors *st);
/* The "__metadata__" object's string values, or NULL when absent. */
const char *cony_safetensors_metadata (const ConySafetensors *st, const char *key);
/* The "__metadata__" keys (NULL-terminated; g_free() the array, not the keys). */
const char **cony_safetensors_metadata_keys (const ConySafetensors *st, guint *n);
const ConyTensorInfo *cony_safetensors_find (const ConySafetensors *st, const char *name);
guint cony_safetensors_n_tensors (const ConySafetensors *st);
const ConyTensorInfo *cony_safetensors_tensor (const ConySafetensors *st, guint index);

/* @shape as error messages write it, "(3, 4)" ("()" for a scalar). g_free() it. */
char *cony_safetensors_shape_string (int ndim, const gsize *shape);

/* Copies tensor @name into a new float32 buffer after checking its shape
 * against @shape (ndim entries). F16 and F64 are converted. NaN or Inf values are
 * refused. Errors name the file, the tensor and the expected shape. */
float *cony_safetensors_get_f32 (const ConySafetensors *st, const char *name, int ndim,
    const gsize *shape, GError **error);

/* Writes float32 tensors (used by tests and tools). @metadata may be NULL:
 * a NULL-terminated list of key, value string pairs. */
gboolean cony_safetensors_write (const char *path, guint n_tensors, const char *const *names,
    const float *const *data, const int *ndims, const gsize *const *shapes,
    const char *const *metadata, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConySafetensors, cony_safetensors_close)

G_END_DECLS
