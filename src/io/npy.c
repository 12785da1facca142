/* NumPy .npy reader and writer for float arrays. */
#include "cony/npy.h"
#include "cony/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

gsize
cony_npy_array_numel (const ConyNpyArray *array)
{
  gsize n = 1;
  for (int i = 0; i < array->ndim; i++)
    n *= array->shape[i];
  return n;
}

void
cony_npy_array_free (ConyNpyArray *array)
{
  if (!array)
    return;
  g_free (array->data);
  g_free (array);
}

/* Finds the value that follows 'key' in the header dict, e.g. "'descr': '<f4'". */
static const char *
header_value (const char *header, const char *key)
{
  const char *p = strstr (header, key);
  if (!p)
    return NULL;
  p = strchr (p + strlen (key), ':');
  if (!p)
    return NULL;
  p++;
  while (*p == ' ')
    p++;
  return p;
}

/* Parses the shape tuple into @a: non-negative decimal integers, at most
 * CONY_NPY_MAX_DIMS of them, whose product (the element count) fits in a gsize of
 * bytes at @elem bytes each. */
static gboolean
parse_shape (const char *p, ConyNpyArray *a, gsize elem, const char *path, GError **error)
{
  if (*p != '(') {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: npy header has no shape tuple", path);
    return FALSE;
  }
  p++;
  a->ndim = 0;
  gsize numel = 1;
  while (*p && *p != ')') {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == ')')
      break;
    char *end = (char *) p;
    guint64 v = 0;
    /* g_ascii_strtoull would take "-1" as 2^64 - 1 and saturate silently */
    if (g_ascii_isdigit (*p)) {
      errno = 0;
      v = g_ascii_strtoull (p, &end, 10);
    }
    if (end == p || errno == ERANGE || a->ndim == CONY_NPY_MAX_DIMS) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: npy field 'shape': dimension %d is not a non-negative integer, or there "
          "are more than %d dimensions",
          path, a->ndim, CONY_NPY_MAX_DIMS);
      return FALSE;
    }
    if (v != 0 && numel > G_MAXSIZE / elem / v) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: npy field 'shape': dimension %d (%" G_GUINT64_FORMAT ") makes the array "
          "larger than memory can address",
          path, a->ndim, v);
      return FALSE;
    }
    numel *= v;
    a->shape[a->ndim++] = v;
    p = end;
  }
  if (*p != ')') {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: npy shape tuple is not closed", path);
    return FALSE;
  }
  return TRUE;
}

ConyNpyArray *
cony_npy_load (const char *path, GError **error)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  if (!g_file_get_contents (path, &contents, &len, error))
    return NULL;

  if (len < 10 || memcmp (contents, "\x93NUMPY", 6) != 0) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: not a .npy file (bad magic)", path);
    return NULL;
  }
  guint major = (guint8) contents[6];
  gsize header_len, header_start;
  if (major == 1) {
    header_len = (guint8) contents[8] | ((gsize) (guint8) contents[9] << 8);
    header_start = 10;
  } else if ((major == 2 || major == 3) && len >= 12) {
    header_len = (guint8) contents[8] | ((gsize) (guint8) contents[9] << 8)
        | ((gsize) (guint8) contents[10] << 16) | ((gsize) (guint8) contents[11] << 24);
    header_start = 12;
  } else {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: unsupported .npy version %u", path,
        major);
    return NULL;
  }
  if (header_start + header_len > len) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: .npy header is truncated", path);
    return NULL;
  }
  g_autofree char *header = g_strndup (contents + header_start, header_len);

  const char *descr = header_value (header, "'descr'");
  const char *order = header_value (header, "'fortran_order'");
  const char *shape = header_value (header, "'shape'");
  if (!descr || !order || !shape) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: .npy header lacks descr, fortran_order or shape", path);
    return NULL;
  }
  gsize elem;
  if (g_str_has_prefix (descr, "'<f4'"))
    elem = 4;
  else if (g_str_has_prefix (descr, "'<f8'"))
    elem = 8;
  else {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: expected dtype float32 ('<f4') or float64 ('<f8'), got %.8s", path, descr);
    return NULL;
  }
  if (!g_str_has_prefix (order, "False")) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: Fortran-ordered arrays are not supported; save with C order", path);
    return NULL;
  }

  g_autoptr (ConyNpyArray) a = g_new0 (ConyNpyArray, 1);
  if (!parse_shape (shape, a, elem, path, error))
    return NULL;
  gsize numel = cony_npy_array_numel (a); /* numel * elem cannot overflow (parse_shape) */
  gsize data_start = header_start + header_len;
  if (len - data_start < numel * elem) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: .npy data is truncated: expected %" G_GSIZE_FORMAT
        " values, file holds %" G_GSIZE_FORMAT " bytes of data",
        path, numel, len - data_start);
    return NULL;
  }
  a->data = g_new (float, MAX (numel, 1));
  const char *src = contents + data_start;
  if (elem == 4) {
    memcpy (a->data, src, numel * 4);
  } else {
    for (gsize i = 0; i < numel; i++) {
      double v;
      memcpy (&v, src + 8 * i, 8);
      a->data[i] = (float) v;
    }
  }
  return g_steal_pointer (&a);
}

gboolean
cony_npy_save (const char *path, const float *data, int ndim, const gsize *shape, GError **error)
{
  GString *h = g_string_new ("{'descr': '<f4', 'fortran_order': False, 'shape': (");
  gsize numel = 1;
  for (int i = 0; i < ndim; i++) {
    g_string_append_printf (h, "%" G_GSIZE_FORMAT "%s", shape[i],
        (ndim == 1 || i + 1 < ndim) ? ", " : "");
    numel *= shape[i];
  }
  if (ndim == 1)
    g_string_truncate (h, h->len - 1);
  g_string_append (h, "), }");
  /* Pad so that the data starts on a 64-byte boundary, ending with a newline. */
  gsize total = 10 + h->len + 1;
  gsize pad = (64 - total % 64) % 64;
  for (gsize i = 0; i < pad; i++)
    g_string_append_c (h, ' ');
  g_string_append_c (h, '\n');

  FILE *f = fopen (path, "wb");
  if (!f) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot write: %s", path,
        g_strerror (errno));
    g_string_free (h, TRUE);
    return FALSE;
  }
  guint8 pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (guint8) (h->len & 0xff),
    (guint8) (h->len >> 8) };
  gboolean ok = fwrite (pre, 1, 10, f) == 10 && fwrite (h->str, 1, h->len, f) == h->len
      && fwrite (data, sizeof (float), numel, f) == numel;
  ok = (fclose (f) == 0) && ok;
  g_string_free (h, TRUE);
  if (!ok)
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: write failed", path);
  return ok;
}
