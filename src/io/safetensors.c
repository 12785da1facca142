/* Memory-mapped safetensors reader and a small writer. */
#include "cony/safetensors.h"

#include "cony/modelpath.h"
#include "cony/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <json-glib/json-glib.h>

#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

struct _ConySafetensors {
  char *path;
  GMappedFile *mapping;
  const guint8 *data; /* start of the data section */
  gsize data_len;
  GPtrArray *tensors;   /* ConyTensorInfo*, names owned in @names */
  GHashTable *by_name;  /* name -> ConyTensorInfo* */
  GHashTable *metadata; /* key -> value (strings) */
  GPtrArray *names;
};

static ConyDType
parse_dtype (const char *s, gsize *elem_size)
{
  static const struct {
    const char *name;
    ConyDType dtype;
    gsize size;
  } table[] = {
    { "F32", CONY_DTYPE_F32, 4 },
    { "F16", CONY_DTYPE_F16, 2 },
    { "F64", CONY_DTYPE_F64, 8 },
    { "I64", CONY_DTYPE_I64, 8 },
    { "I8", CONY_DTYPE_I8, 1 },
    { "U8", CONY_DTYPE_U8, 1 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (table); i++)
    if (g_strcmp0 (s, table[i].name) == 0) {
      *elem_size = table[i].size;
      return table[i].dtype;
    }
  *elem_size = 0;
  return CONY_DTYPE_OTHER;
}

static const char *
dtype_name (ConyDType d)
{
  switch (d) {
    case CONY_DTYPE_F32: return "F32";
    case CONY_DTYPE_F16: return "F16";
    case CONY_DTYPE_F64: return "F64";
    case CONY_DTYPE_I64: return "I64";
    case CONY_DTYPE_I8: return "I8";
    case CONY_DTYPE_U8: return "U8";
    default: return "unsupported";
  }
}

void
cony_safetensors_close (ConySafetensors *st)
{
  if (!st)
    return;
  if (st->tensors)
    g_ptr_array_unref (st->tensors);
  if (st->by_name)
    g_hash_table_unref (st->by_name);
  if (st->metadata)
    g_hash_table_unref (st->metadata);
  if (st->names)
    g_ptr_array_unref (st->names);
  if (st->mapping)
    g_mapped_file_unref (st->mapping);
  g_free (st->path);
  g_free (st);
}

static gboolean
parse_metadata (ConySafetensors *st, JsonNode *node, GError **error)
{
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: __metadata__ is not an object",
        st->path);
    return FALSE;
  }
  JsonObject *obj = json_node_get_object (node);
  g_autoptr (GList) members = json_object_get_members (obj);
  for (GList *l = members; l; l = l->next) {
    JsonNode *v = json_object_get_member (obj, l->data);
    if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: __metadata__ value '%s' is not a string", st->path, (char *) l->data);
      return FALSE;
    }
    g_hash_table_insert (st->metadata, g_strdup (l->data), g_strdup (json_node_get_string (v)));
  }
  return TRUE;
}

static gboolean
parse_tensor (ConySafetensors *st, const char *name, JsonNode *node, GError **error)
{
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: tensor '%s': header entry is not an object", st->path, name);
    return FALSE;
  }
  JsonObject *obj = json_node_get_object (node);
  JsonNode *dt = json_object_get_member (obj, "dtype");
  JsonNode *sh = json_object_get_member (obj, "shape");
  JsonNode *off = json_object_get_member (obj, "data_offsets");
  if (!dt || !sh || !off || !JSON_NODE_HOLDS_VALUE (dt)
      || json_node_get_value_type (dt) != G_TYPE_STRING || !JSON_NODE_HOLDS_ARRAY (sh)
      || !JSON_NODE_HOLDS_ARRAY (off)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: tensor '%s': header entry needs dtype (string), shape and data_offsets (arrays)",
        st->path, name);
    return FALSE;
  }
  ConyTensorInfo *t = g_new0 (ConyTensorInfo, 1);
  char *owned_name = g_strdup (name);
  g_ptr_array_add (st->names, owned_name);
  t->name = owned_name;
  g_ptr_array_add (st->tensors, t);
  gsize elem;
  t->dtype = parse_dtype (json_node_get_string (dt), &elem);

  JsonArray *shape = json_node_get_array (sh);
  guint nd = json_array_get_length (shape);
  if (nd > 8) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: tensor '%s' has %u dimensions (max 8)",
        st->path, name, nd);
    return FALSE;
  }
  t->ndim = nd;
  t->numel = 1;
  for (guint i = 0; i < nd; i++) {
    JsonNode *e = json_array_get_element (shape, i);
    if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64
        || json_node_get_int (e) < 0) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: tensor '%s': shape entry %u is not a "
          "non-negative integer",
          st->path, name, i);
      return FALSE;
    }
    t->shape[i] = json_node_get_int (e);
    if (t->shape[i] != 0 && t->numel > G_MAXSIZE / 16 / t->shape[i]) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT, "%s: tensor '%s': shape is absurdly large",
          st->path, name);
      return FALSE;
    }
    t->numel *= t->shape[i];
  }

  JsonArray *offsets = json_node_get_array (off);
  gint64 offset[2];
  for (guint i = 0; i < 2; i++) {
    /* an array or object here made json-glib complain (a critical), a float was truncated */
    JsonNode *e = json_array_get_length (offsets) == 2 ? json_array_get_element (offsets, i) : NULL;
    if (!e || !JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: tensor '%s': data_offsets must be 2 integers", st->path, name);
      return FALSE;
    }
    offset[i] = json_node_get_int (e);
  }
  gint64 begin = offset[0], end = offset[1];
  if (begin < 0 || end < begin || (guint64) end > st->data_len) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: tensor '%s': data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
        ") lie outside the %" G_GSIZE_FORMAT "-byte data section (file truncated?)",
        st->path, name, begin, end, st->data_len);
    return FALSE;
  }
  if (elem && (gsize) (end - begin) != t->numel * elem) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: tensor '%s': %s shape needs %" G_GSIZE_FORMAT
        " bytes but data_offsets span %" G_GINT64_FORMAT,
        st->path, name, dtype_name (t->dtype), t->numel * elem, end - begin);
    return FALSE;
  }
  t->data = st->data + begin;
  t->nbytes = end - begin;
  g_hash_table_insert (st->by_name, owned_name, t);
  return TRUE;
}

static gint
compare_by_offset (gconstpointer a, gconstpointer b)
{
  const ConyTensorInfo *x = *(ConyTensorInfo *const *) a, *y = *(ConyTensorInfo *const *) b;
  return x->data < y->data ? -1 : x->data > y->data;
}

/* The format forbids tensors sharing bytes: a writer that aliases them is broken, and a
 * hostile file could make two weights one. Empty tensors occupy nothing. */
static gboolean
check_no_overlap (const ConySafetensors *st, GError **error)
{
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();
  for (guint i = 0; i < st->tensors->len; i++) {
    ConyTensorInfo *t = g_ptr_array_index (st->tensors, i);
    if (t->nbytes)
      g_ptr_array_add (sorted, t);
  }
  g_ptr_array_sort (sorted, compare_by_offset);
  for (guint i = 1; i < sorted->len; i++) {
    const ConyTensorInfo *a = g_ptr_array_index (sorted, i - 1), *b = g_ptr_array_index (sorted, i);
    if (b->data < a->data + a->nbytes) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
          "%s: tensors '%s' [%td, %td) and '%s' [%td, %td) overlap in the data section", st->path,
          a->name, a->data - st->data, a->data + a->nbytes - st->data, b->name, b->data - st->data,
          b->data + b->nbytes - st->data);
      return FALSE;
    }
  }
  return TRUE;
}

ConySafetensors *
cony_safetensors_open (const char *path, GError **error)
{
  g_autofree char *found = cony_model_path_find (path, error);
  if (found == NULL)
    return NULL;
  path = found;
  g_autoptr (ConySafetensors) st = g_new0 (ConySafetensors, 1);
  st->path = g_strdup (path);
  st->tensors = g_ptr_array_new_with_free_func (g_free);
  st->names = g_ptr_array_new_with_free_func (g_free);
  st->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  st->metadata = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  GError *local = NULL;
  st->mapping = g_mapped_file_new (path, FALSE, &local);
  if (!st->mapping) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot open: %s", path, local->message);
    g_error_free (local);
    return NULL;
  }
  gsize len = g_mapped_file_get_length (st->mapping);
  const guint8 *bytes = (const guint8 *) g_mapped_file_get_contents (st->mapping);
  if (len < 8) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: not a safetensors file (%" G_GSIZE_FORMAT " bytes, need at least 8)", path, len);
    return NULL;
  }
  guint64 hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = (hlen << 8) | bytes[i];
  if (hlen > MAX_HEADER_BYTES || hlen > len - 8) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: safetensors header claims %" G_GUINT64_FORMAT
        " bytes but the file has %" G_GSIZE_FORMAT
        " after the length field (truncated or not safetensors)",
        path, hlen, len - 8);
    return NULL;
  }
  st->data = bytes + 8 + hlen;
  st->data_len = len - 8 - hlen;

  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, (const char *) bytes + 8, (gssize) hlen, &local)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: safetensors header is not valid JSON: %s", path, local->message);
    g_error_free (local);
    return NULL;
  }
  JsonNode *root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_FORMAT,
        "%s: safetensors header is not a JSON object", path);
    return NULL;
  }
  JsonObject *obj = json_node_get_object (root);
  g_autoptr (GList) members = json_object_get_members (obj);
  for (GList *l = members; l; l = l->next) {
    const char *name = l->data;
    JsonNode *node = json_object_get_member (obj, name);
    gboolean ok = g_str_equal (name, "__metadata__") ? parse_metadata (st, node, error)
                                                     : parse_tensor (st, name, node, error);
    if (!ok)
      return NULL;
  }
  if (!check_no_overlap (st, error))
    return NULL;
  return g_steal_pointer (&st);
}

const char *
cony_safetensors_path (const ConySafetensors *st)
{
  return st->path;
}

const char *
cony_safetensors_metadata (const ConySafetensors *st, const char *key)
{
  return g_hash_table_lookup (st->metadata, key);
}

const char **
cony_safetensors_metadata_keys (const ConySafetensors *st, guint *n)
{
  return (const char **) g_hash_table_get_keys_as_array (st->metadata, n);
}

const ConyTensorInfo *
cony_safetensors_find (const ConySafetensors *st, const char *name)
{
  return g_hash_table_lookup (st->by_name, name);
}

guint
cony_safetensors_n_tensors (const ConySafetensors *st)
{
  return st->tensors->len;
}

const ConyTensorInfo *
cony_safetensors_tensor (const ConySafetensors *st, guint index)
{
  return index < st->tensors->len ? g_ptr_array_index (st->tensors, index) : NULL;
}

static float
half_to_float (guint16 h)
{
  guint32 sign = (guint32) (h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400));
      bits = sign | ((guint32) (127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy (&f, &bits, 4);
  return f;
}

char *
cony_safetensors_shape_string (int ndim, const gsize *shape)
{
  GString *s = g_string_new ("(");
  for (int i = 0; i < ndim; i++)
    g_string_append_printf (s, "%s%" G_GSIZE_FORMAT, i ? ", " : "", shape[i]);
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
}

float *
cony_safetensors_get_f32 (const ConySafetensors *st, const char *name, int ndim, const gsize *shape,
    GError **error)
{
  const ConyTensorInfo *t = cony_safetensors_find (st, name);
  g_autofree char *want = cony_safetensors_shape_string (ndim, shape);
  if (!t) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_MISSING,
        "%s: tensor '%s' is missing (expected shape %s)", st->path, name, want);
    return NULL;
  }
  gboolean same = t->ndim == ndim;
  for (int i = 0; same && i < ndim; i++)
    same = t->shape[i] == shape[i];
  if (!same) {
    g_autofree char *got = cony_safetensors_shape_string (t->ndim, t->shape);
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE, "%s: tensor '%s' has shape %s, expected %s",
        st->path, name, got, want);
    return NULL;
  }
  if (t->dtype != CONY_DTYPE_F32 && t->dtype != CONY_DTYPE_F16 && t->dtype != CONY_DTYPE_F64) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_SHAPE,
        "%s: tensor '%s' has dtype %s, expected F32 (or F16/F64)", st->path, name,
        dtype_name (t->dtype));
    return NULL;
  }
  float *out = g_new (float, MAX (t->numel, 1));
  for (gsize i = 0; i < t->numel; i++) {
    float v;
    if (t->dtype == CONY_DTYPE_F32) {
      memcpy (&v, t->data + 4 * i, 4);
    } else if (t->dtype == CONY_DTYPE_F16) {
      guint16 h;
      memcpy (&h, t->data + 2 * i, 2);
      v = half_to_float (GUINT16_FROM_LE (h));
    } else {
      double d;
      memcpy (&d, t->data + 8 * i, 8);
      v = (float) d;
    }
    if (!isfinite (v)) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "%s: tensor '%s' holds a non-finite value (%g) at flat index %" G_GSIZE_FORMAT, st->path,
          name, v, i);
      g_free (out);
      return NULL;
    }
    out[i] = v;
  }
  return out;
}

gboolean
cony_safetensors_write (const char *path, guint n_tensors, const char *const *names,
    const float *const *data, const int *ndims, const gsize *const *shapes,
    const char *const *metadata, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  if (metadata && metadata[0]) {
    json_builder_set_member_name (b, "__metadata__");
    json_builder_begin_object (b);
    for (guint i = 0; metadata[i]; i += 2) {
      json_builder_set_member_name (b, metadata[i]);
      json_builder_add_string_value (b, metadata[i + 1]);
    }
    json_builder_end_object (b);
  }
  gsize offset = 0;
  for (guint i = 0; i < n_tensors; i++) {
    gsize numel = 1;
    json_builder_set_member_name (b, names[i]);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "dtype");
    json_builder_add_string_value (b, "F32");
    json_builder_set_member_name (b, "shape");
    json_builder_begin_array (b);
    for (int k = 0; k < ndims[i]; k++) {
      json_builder_add_int_value (b, shapes[i][k]);
      numel *= shapes[i][k];
    }
    json_builder_end_array (b);
    json_builder_set_member_name (b, "data_offsets");
    json_builder_begin_array (b);
    json_builder_add_int_value (b, offset);
    json_builder_add_int_value (b, offset + 4 * numel);
    json_builder_end_array (b);
    json_builder_end_object (b);
    offset += 4 * numel;
  }
  json_builder_end_object (b);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  gsize hlen;
  g_autofree char *header = json_generator_to_data (gen, &hlen);
  gsize padded = (hlen + 7) / 8 * 8; /* keep the data 8-byte aligned */

  FILE *f = fopen (path, "wb");
  if (!f) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: cannot write: %s", path,
        g_strerror (errno));
    return FALSE;
  }
  guint8 lenbytes[8];
  for (int i = 0; i < 8; i++)
    lenbytes[i] = (guint8) ((guint64) padded >> (8 * i));
  gboolean ok = fwrite (lenbytes, 1, 8, f) == 8 && fwrite (header, 1, hlen, f) == hlen;
  for (gsize i = hlen; ok && i < padded; i++)
    ok = fputc (' ', f) != EOF;
  for (guint i = 0; ok && i < n_tensors; i++) {
    gsize numel = 1;
    for (int k = 0; k < ndims[i]; k++)
      numel *= shapes[i][k];
    ok = fwrite (data[i], sizeof (float), numel, f) == numel;
  }
  ok = (fclose (f) == 0) && ok;
  if (!ok)
    g_set_error (error, CONY_ERROR, CONY_ERROR_IO, "%s: write failed", path);
  return ok;
}
