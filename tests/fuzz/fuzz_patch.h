/* Shared by the harnesses that attack one part of a model file (fusion config, CNN
 * quantisation, MobileNet-v2 layer lists): the input is a small JSON patch applied to a
 * known-good base file from tests/golden/, so the fuzzer mutates the few fields that
 * matter instead of a whole safetensors file (the `model` and `cnn` harnesses do that):
 *
 *   {"base": 1,                                    which base file (index, default 0)
 *    "meta": {"KEY": VALUE or null, ...},          __metadata__ entries: a string is kept
 *                                                  as is, any other JSON value is written
 *                                                  as JSON text, null removes the entry
 *    "tensors": {"NAME": null or {"dtype": "F32", "shape": [..], "data": [..]}, ...}}
 *
 * A tensor's "data" holds numbers (or "nan", "inf", "-inf", "denormal"), converted to the
 * dtype (integers saturated to its range); without "data" the base tensor's bytes are kept
 * (cut or zero-extended to the new size), and without "dtype" or "shape" the base's. The
 * patched file goes to the loader through a memfd (fuzz.h). */
#pragma once
#include "fuzz.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#ifndef CONY_FUZZ_GOLDEN
#error "CONY_FUZZ_GOLDEN (the tests/golden directory) must be defined"
#endif

/* Elements a patched tensor may have (the harness's own memory, not a finding). */
#define FUZZ_PATCH_MAX_NUMEL (1 << 20)

typedef struct {
  JsonObject *header; /* the base file's header, tensors and __metadata__ */
  GBytes *data;       /* its data section */
} FuzzBase;

/* Loads tests/golden/@relpath once (aborts when it cannot: the harness cannot run). */
static void
fuzz_base_load (FuzzBase *b, const char *relpath)
{
  g_autofree char *path = g_build_filename (CONY_FUZZ_GOLDEN, relpath, NULL);
  gchar *bytes = NULL;
  gsize len = 0;
  g_assert (g_file_get_contents (path, &bytes, &len, NULL) && len >= 8);
  guint64 n = GUINT64_FROM_LE (*(guint64 *) bytes);
  g_assert (n <= len - 8);
  JsonParser *p = json_parser_new ();
  g_assert (json_parser_load_from_data (p, bytes + 8, (gssize) n, NULL));
  b->header = json_object_ref (json_node_get_object (json_parser_get_root (p)));
  b->data = g_bytes_new (bytes + 8 + n, len - 8 - n);
  g_object_unref (p);
  g_free (bytes);
}

static gsize
fuzz_dtype_bytes (const char *dtype)
{
  if (!strcmp (dtype, "I8") || !strcmp (dtype, "U8") || !strcmp (dtype, "BOOL"))
    return 1;
  if (!strcmp (dtype, "F16") || !strcmp (dtype, "BF16") || !strcmp (dtype, "I16")
      || !strcmp (dtype, "U16"))
    return 2;
  if (!strcmp (dtype, "F64") || !strcmp (dtype, "I64") || !strcmp (dtype, "U64"))
    return 8;
  return 4;
}

static double
fuzz_patch_number (JsonNode *n)
{
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING) {
    const char *s = json_node_get_string (n);
    if (!strcmp (s, "nan"))
      return NAN;
    if (!strcmp (s, "inf"))
      return INFINITY;
    if (!strcmp (s, "-inf"))
      return -INFINITY;
    if (!strcmp (s, "denormal"))
      return 1e-45;
    return 0;
  }
  return JSON_NODE_HOLDS_VALUE (n) ? json_node_get_double (n) : 0;
}

/* @v into @out as @dtype (integers saturated; non-finite ones 0: the harness itself must
 * not convert out of range). */
static void
fuzz_patch_store (const char *dtype, double v, guint8 *out)
{
  gsize w = fuzz_dtype_bytes (dtype);
  if (!strcmp (dtype, "F32")) {
    float f = (float) v;
    memcpy (out, &f, 4);
  } else if (!strcmp (dtype, "F64")) {
    memcpy (out, &v, 8);
  } else if (dtype[0] == 'I' || dtype[0] == 'U') {
    double lo = dtype[0] == 'U' ? 0 : -ldexp (1, (int) (8 * w - 1));
    double hi = ldexp (1, (int) (8 * w - (dtype[0] == 'U' ? 0 : 1))) - 1;
    v = isfinite (v) ? CLAMP (nearbyint (v), lo, hi) : 0;
    gint64 i = v >= 9.2e18 ? G_MAXINT64 : (gint64) v;
    guint64 u = (guint64) i;
    for (gsize k = 0; k < w; k++)
      out[k] = (guint8) (u >> (8 * k));
  } /* other dtypes: zero bytes */
}

/* The elements a JSON shape declares, or -1 when it is not a list of small non-negative
 * integers (then the data's own length is written, for the loader to refuse). */
static gint64
fuzz_patch_numel (JsonArray *shape)
{
  gint64 numel = 1;
  for (guint i = 0; shape && i < json_array_get_length (shape); i++) {
    JsonNode *d = json_array_get_element (shape, i);
    if (!JSON_NODE_HOLDS_VALUE (d) || json_node_get_value_type (d) != G_TYPE_INT64)
      return -1;
    gint64 v = json_node_get_int (d);
    if (v < 0 || v > FUZZ_PATCH_MAX_NUMEL || numel * v > FUZZ_PATCH_MAX_NUMEL)
      return -1;
    numel *= v;
  }
  return shape ? numel : -1;
}

typedef struct {
  char *name;
  JsonNode *dtype, *shape; /* as they go into the header */
  GByteArray *bytes;
} FuzzTensor;

static void
fuzz_tensor_free (gpointer p)
{
  FuzzTensor *t = p;
  g_free (t->name);
  json_node_unref (t->dtype);
  json_node_unref (t->shape);
  g_byte_array_unref (t->bytes);
  g_free (t);
}

/* Applies patch @spec to tensor @t (FALSE: the patch asks for more than the harness
 * allows). */
static gboolean
fuzz_patch_tensor (FuzzTensor *t, JsonObject *spec)
{
  JsonNode *dt = json_object_get_member (spec, "dtype");
  if (dt && JSON_NODE_HOLDS_VALUE (dt) && json_node_get_value_type (dt) == G_TYPE_STRING) {
    json_node_unref (t->dtype);
    t->dtype = json_node_copy (dt);
  }
  JsonNode *sh = json_object_get_member (spec, "shape");
  if (sh) {
    json_node_unref (t->shape);
    t->shape = json_node_copy (sh);
  }
  const char *dtype = json_node_get_string (t->dtype);
  dtype = dtype ? dtype : "F32";
  JsonNode *dn = json_object_get_member (spec, "data");
  JsonArray *data = dn && JSON_NODE_HOLDS_ARRAY (dn) ? json_node_get_array (dn) : NULL;
  gint64 numel = fuzz_patch_numel (
      JSON_NODE_HOLDS_ARRAY (t->shape) ? json_node_get_array (t->shape) : NULL);
  if (numel < 0)
    numel = data ? json_array_get_length (data)
                 : (gint64) (t->bytes->len / fuzz_dtype_bytes (dtype));
  if (numel > FUZZ_PATCH_MAX_NUMEL)
    return FALSE;
  gsize w = fuzz_dtype_bytes (dtype), len = (gsize) numel * w;
  if (data) {
    g_byte_array_set_size (t->bytes, 0);
    g_byte_array_set_size (t->bytes, (guint) len);
    if (len > 0)
      memset (t->bytes->data, 0, len);
    guint n = json_array_get_length (data);
    for (gsize i = 0; n > 0 && i < (gsize) numel; i++)
      fuzz_patch_store (dtype, fuzz_patch_number (json_array_get_element (data, i % n)),
          t->bytes->data + i * w);
  } else {
    guint old = t->bytes->len;
    g_byte_array_set_size (t->bytes, (guint) len);
    if (len > old)
      memset (t->bytes->data + old, 0, len - old);
  }
  return TRUE;
}

static FuzzTensor *
fuzz_tensor_find (GPtrArray *tensors, const char *name)
{
  for (guint i = 0; i < tensors->len; i++)
    if (!strcmp (((FuzzTensor *) tensors->pdata[i])->name, name))
      return tensors->pdata[i];
  return NULL;
}

/* The tensors of @base (in header order). */
static GPtrArray *
fuzz_base_tensors (const FuzzBase *base)
{
  GPtrArray *tensors = g_ptr_array_new_with_free_func (fuzz_tensor_free);
  g_autoptr (GList) names = json_object_get_members (base->header);
  gsize data_len = 0;
  const guint8 *data = g_bytes_get_data (base->data, &data_len);
  for (GList *l = names; l; l = l->next) {
    if (!strcmp (l->data, "__metadata__"))
      continue;
    JsonObject *o = json_object_get_object_member (base->header, l->data);
    JsonArray *off = json_object_get_array_member (o, "data_offsets");
    gsize a = (gsize) json_array_get_int_element (off, 0),
          b = (gsize) json_array_get_int_element (off, 1);
    g_assert (a <= b && b <= data_len);
    FuzzTensor *t = g_new0 (FuzzTensor, 1);
    t->name = g_strdup (l->data);
    t->dtype = json_node_copy (json_object_get_member (o, "dtype"));
    t->shape = json_node_copy (json_object_get_member (o, "shape"));
    t->bytes = g_byte_array_new ();
    g_byte_array_append (t->bytes, data + a, (guint) (b - a));
    g_ptr_array_add (tensors, t);
  }
  return tensors;
}

/* The __metadata__ of @base patched by @meta (NULL: none). */
static JsonObject *
fuzz_patch_meta (const FuzzBase *base, JsonObject *meta)
{
  JsonObject *out = json_object_new ();
  JsonObject *old = json_object_has_member (base->header, "__metadata__")
      ? json_object_get_object_member (base->header, "__metadata__")
      : NULL;
  g_autoptr (GList) keys = old ? json_object_get_members (old) : NULL;
  for (GList *l = keys; l; l = l->next)
    json_object_set_string_member (out, l->data, json_object_get_string_member (old, l->data));
  g_autoptr (GList) patch = meta ? json_object_get_members (meta) : NULL;
  for (GList *l = patch; l; l = l->next) {
    JsonNode *v = json_object_get_member (meta, l->data);
    if (JSON_NODE_HOLDS_NULL (v))
      json_object_remove_member (out, l->data);
    else if (JSON_NODE_HOLDS_VALUE (v) && json_node_get_value_type (v) == G_TYPE_STRING)
      json_object_set_string_member (out, l->data, json_node_get_string (v));
    else {
      g_autofree char *text = json_to_string (v, FALSE);
      json_object_set_string_member (out, l->data, text);
    }
  }
  return out;
}

/* The file: header (padded with spaces to 8 bytes) and data. */
static GByteArray *
fuzz_patch_write (JsonObject *meta, GPtrArray *tensors)
{
  JsonObject *h = json_object_new ();
  json_object_set_object_member (h, "__metadata__", meta);
  gsize off = 0;
  for (guint i = 0; i < tensors->len; i++) {
    FuzzTensor *t = tensors->pdata[i];
    JsonObject *o = json_object_new ();
    json_object_set_member (o, "dtype", json_node_copy (t->dtype));
    json_object_set_member (o, "shape", json_node_copy (t->shape));
    JsonArray *a = json_array_new ();
    json_array_add_int_element (a, (gint64) off);
    json_array_add_int_element (a, (gint64) (off + t->bytes->len));
    json_object_set_array_member (o, "data_offsets", a);
    json_object_set_object_member (h, t->name, o);
    off += t->bytes->len;
  }
  JsonNode *root = json_node_init_object (json_node_alloc (), h);
  gsize hlen = 0;
  g_autofree char *text = json_to_string (root, FALSE);
  hlen = strlen (text);
  gsize padded = (hlen + 7) / 8 * 8;
  GByteArray *file = g_byte_array_sized_new ((guint) (8 + padded + off));
  guint64 le = GUINT64_TO_LE ((guint64) padded);
  g_byte_array_append (file, (guint8 *) &le, 8);
  g_byte_array_append (file, (guint8 *) text, (guint) hlen);
  for (gsize i = hlen; i < padded; i++)
    g_byte_array_append (file, (const guint8 *) " ", 1);
  for (guint i = 0; i < tensors->len; i++) {
    FuzzTensor *t = tensors->pdata[i];
    g_byte_array_append (file, t->bytes->data, t->bytes->len);
  }
  json_node_unref (root);
  json_object_unref (h);
  return file;
}

/* The base file picked by @data's "base" (of @n_bases) patched by @data, opened as *@f;
 * FALSE when @data is not a patch (not a JSON object, or more than the harness allows):
 * nothing to test. *@which gets the base's index. */
static gboolean
fuzz_patch_open (const FuzzBase *bases, guint n_bases, const uint8_t *data, size_t size,
    FuzzFile *f, guint *which)
{
  JsonParser *p = json_parser_new ();
  gboolean ok = size > 0 && json_parser_load_from_data (p, (const char *) data, (gssize) size, NULL)
      && json_parser_get_root (p) && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p));
  if (!ok) {
    g_object_unref (p);
    return FALSE;
  }
  JsonObject *patch = json_node_get_object (json_parser_get_root (p));
  JsonNode *bn = json_object_get_member (patch, "base");
  gint64 b = bn && JSON_NODE_HOLDS_VALUE (bn) && json_node_get_value_type (bn) == G_TYPE_INT64
      ? json_node_get_int (bn)
      : 0;
  *which = b >= 0 && b < (gint64) n_bases ? (guint) b : 0;
  const FuzzBase *base = &bases[*which];
  GPtrArray *tensors = fuzz_base_tensors (base);
  JsonNode *tn = json_object_get_member (patch, "tensors");
  JsonObject *to = tn && JSON_NODE_HOLDS_OBJECT (tn) ? json_node_get_object (tn) : NULL;
  g_autoptr (GList) names = to ? json_object_get_members (to) : NULL;
  for (GList *l = names; ok && l; l = l->next) {
    JsonNode *spec = json_object_get_member (to, l->data);
    FuzzTensor *t = fuzz_tensor_find (tensors, l->data);
    if (!JSON_NODE_HOLDS_OBJECT (spec)) {
      if (t)
        g_ptr_array_remove (tensors, t);
      continue;
    }
    if (!t) {
      t = g_new0 (FuzzTensor, 1);
      t->name = g_strdup (l->data);
      t->dtype = json_node_init_string (json_node_alloc (), "F32");
      t->shape = json_node_init_null (json_node_alloc ());
      t->bytes = g_byte_array_new ();
      g_ptr_array_add (tensors, t);
    }
    ok = fuzz_patch_tensor (t, json_node_get_object (spec));
  }
  if (ok) {
    JsonNode *mn = json_object_get_member (patch, "meta");
    JsonObject *meta = fuzz_patch_meta (base,
        mn && JSON_NODE_HOLDS_OBJECT (mn) ? json_node_get_object (mn) : NULL);
    GByteArray *file = fuzz_patch_write (meta, tensors);
    fuzz_file_open (f, file->data, file->len);
    g_byte_array_unref (file);
  }
  g_ptr_array_unref (tensors);
  g_object_unref (p);
  return ok;
}
