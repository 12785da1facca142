/* Plumbing shared by the cony elements. */
#include "gstconyelement.h"
#include "gstconytokens.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cony/modelpath.h"

GstStateChangeReturn
gst_cony_element_change_state (GstElement *element, GstStateChange transition,
    GstElementClass *parent_class, GstConyStartFunc start, GstConyStopFunc stop)
{
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && !start (element))
    return GST_STATE_CHANGE_FAILURE;

  GstStateChangeReturn ret = parent_class->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
      stop (element);
    return ret;
  }
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    stop (element);
    gst_cony_element_trim_heap ();
  }
  return ret;
}

void
gst_cony_element_trim_heap (void)
{
#ifdef __GLIBC__
  if (!g_getenv ("CONY_NO_TRIM"))
    malloc_trim (0);
#endif
}

gboolean
gst_cony_element_query_latency (GstElement *element, GstPad *sinkpad, GstQuery *query,
    GstClockTime own)
{
  gboolean live;
  GstClockTime min, max;

  if (!gst_pad_peer_query (sinkpad, query))
    return FALSE;
  if (!GST_CLOCK_TIME_IS_VALID (own)) {
    GST_DEBUG_OBJECT (element, "latency queried before the element's delay is known");
    return TRUE;
  }
  gst_query_parse_latency (query, &live, &min, &max);
  GST_DEBUG_OBJECT (element,
      "upstream latency %" GST_TIME_FORMAT "-%" GST_TIME_FORMAT ", adding %" GST_TIME_FORMAT,
      GST_TIME_ARGS (min), GST_TIME_ARGS (max), GST_TIME_ARGS (own));
  min = gst_cony_time_add (min, own);
  max = gst_cony_time_add (max, own); /* NONE (no maximum) stays NONE */
  gst_query_set_latency (query, live, min, max);
  return TRUE;
}

gboolean
gst_cony_element_property_settable (GObject *object, GParamSpec *pspec)
{
  GstElement *element = GST_ELEMENT (object);
  GstState state, pending;

  if (!(pspec->flags & GST_PARAM_MUTABLE_READY))
    return TRUE;
  GST_OBJECT_LOCK (element);
  state = GST_STATE (element);
  pending = GST_STATE_PENDING (element);
  GST_OBJECT_UNLOCK (element);
  if (state <= GST_STATE_READY && pending <= GST_STATE_READY)
    return TRUE;
  GST_WARNING_OBJECT (element,
      "property '%s' can only be changed in the NULL or READY state "
      "(the element is %s): the change is ignored, the old value stays in use",
      pspec->name, gst_element_state_get_name (MAX (state, pending)));
  return FALSE;
}

gboolean
gst_cony_element_find_model (GstElement *element, gchar **path, const gchar *what)
{
  GError *error = NULL;
  if (*path == NULL || **path == '\0') {
    GST_ELEMENT_ERROR (element, RESOURCE, NOT_FOUND, ("No model file given: set model=%s", what),
        ("a relative name is looked up in the current directory, $CONY_MODEL_PATH and %s",
            cony_model_path_datadir ()));
    return FALSE;
  }
  gchar *found = cony_model_path_find (*path, &error);
  if (found == NULL) {
    GST_ELEMENT_ERROR (element, RESOURCE, NOT_FOUND, ("%s", error->message), ("model=%s", *path));
    g_error_free (error);
    return FALSE;
  }
  g_free (*path);
  *path = found;
  return TRUE;
}

gboolean
gst_cony_element_check_loaded (GstElement *element, gboolean loaded, const gchar *path,
    const GError *error)
{
  if (!loaded)
    GST_ELEMENT_ERROR (element, RESOURCE, OPEN_READ,
        ("Could not load the model: %s", error ? error->message : "unknown error"),
        ("model=%s", path));
  return loaded;
}

gboolean
gst_cony_element_load_cnn (GstElement *element, ConyCnn **slot, const gchar *path)
{
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (path, &error);
  gst_cony_element_free_cnn (element, slot);
  GST_OBJECT_LOCK (element);
  *slot = cnn;
  GST_OBJECT_UNLOCK (element);
  gboolean ok = gst_cony_element_check_loaded (element, cnn != NULL, path, error);
  g_clear_error (&error);
  return ok;
}

void
gst_cony_element_free_cnn (GstElement *element, ConyCnn **slot)
{
  GST_OBJECT_LOCK (element);
  ConyCnn *cnn = g_steal_pointer (slot);
  GST_OBJECT_UNLOCK (element);
  cony_cnn_free (cnn);
}

void
gst_cony_element_install_model_users (GObjectClass *klass, guint prop_id)
{
  /**
   * model-users:
   *
   * How many users in this process (this element included) share the loaded
   * model's weights: elements (and other loads) of the same unchanged file hold one
   * copy of them. 0 while no model is loaded.
   */
  g_object_class_install_property (klass, prop_id,
      g_param_spec_uint ("model-users", "Model users",
          "Users in this process of this element's loaded CNN weights, one copy in memory "
          "(0: no model loaded)",
          0, G_MAXUINT, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

guint
gst_cony_element_model_users (const ConyCnn *cnn)
{
  return cnn ? cony_cnn_get_weights_users (cnn) : 0;
}

GType
gst_cony_precision_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { CONY_CNN_PRECISION_AUTO,
        "int8 for files with int8/uint8 activation quantisation (YAMNet, the ImageNet "
        "MobileNets), else float",
        "auto" },
    { CONY_CNN_PRECISION_FLOAT, "The float engine, whatever the file", "float" },
    { CONY_CNN_PRECISION_INT8, "int8 inference (the file must be quantised)", "int8" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyPrecision", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

void
gst_cony_element_install_precision (GObjectClass *klass, guint prop_precision, guint prop_in_use,
    GParamFlags flags)
{
  /**
   * precision:
   *
   * The arithmetic of the CNN: `auto` (default) lets the model file decide: a
   * file converted from a quantised .tflite (YAMNet, the ImageNet MobileNets, by
   * training/convert_tflite.py) records its activations' scales and zero points and
   * runs TFLite's integer inference (int8 activations, int8 or uint8 weights, int32
   * accumulation, outputs dequantised); other files run in float. `float` forces
   * the float engine on the same weights; `int8` fails to start on a file without
   * activation quantisation. See precision-in-use.
   */
  g_object_class_install_property (klass, prop_precision,
      g_param_spec_enum ("precision", "Precision",
          "CNN arithmetic: auto (the file decides), float, or int8 (quantised files only)",
          GST_TYPE_CONY_PRECISION, CONY_CNN_PRECISION_AUTO, flags));
  /**
   * precision-in-use:
   *
   * What runs once the element has started (NULL before): e.g. "int8, all 30
   * layers (avx2 kernels)", "float (the file has no int8 activation
   * quantisation)".
   */
  g_object_class_install_property (klass, prop_in_use,
      g_param_spec_string ("precision-in-use", "Precision in use",
          "What the CNN runs once started: int8 (which layers, which kernels) or float", NULL,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

gboolean
gst_cony_element_set_precision (GstElement *element, ConyCnn *cnn, ConyCnnPrecision precision,
    const gchar *path)
{
  g_autoptr (GError) error = NULL;
  if (cony_cnn_set_precision (cnn, precision, &error))
    return TRUE;
  GST_ELEMENT_ERROR (element, LIBRARY, SETTINGS, ("precision: %s", error->message),
      ("model=%s", path));
  return FALSE;
}

gboolean
gst_cony_element_check_caps_seen (GstElement *element, gboolean have_caps)
{
  if (!have_caps)
    GST_ELEMENT_ERROR (element, CORE, NEGOTIATION, (NULL), ("no caps before the first buffer"));
  return have_caps;
}

const GstCaps *
gst_cony_element_refused_caps (GstQuery *query)
{
  GstCaps *caps = NULL;
  if (GST_QUERY_TYPE (query) == GST_QUERY_CAPS) {
    GstCaps *result = NULL;
    gst_query_parse_caps (query, &caps);
    gst_query_parse_caps_result (query, &result);
    return caps && !gst_caps_is_empty (caps) && result && gst_caps_is_empty (result) ? caps : NULL;
  }
  if (GST_QUERY_TYPE (query) == GST_QUERY_ACCEPT_CAPS) {
    gboolean ok = TRUE;
    gst_query_parse_accept_caps (query, &caps);
    gst_query_parse_accept_caps_result (query, &ok);
    return ok ? NULL : caps;
  }
  return NULL;
}

void
gst_cony_element_refuse_caps (GstElement *element, gboolean *posted, const gchar *takes,
    const gchar *got, const gchar *hint, const GstCaps *offered)
{
  if (*posted)
    return;
  *posted = TRUE;
  GstElementFactory *factory = gst_element_get_factory (element);
  const gchar *name = factory ? GST_OBJECT_NAME (factory) : G_OBJECT_TYPE_NAME (element);
  GST_ELEMENT_ERROR (element, CORE, NEGOTIATION,
      ("%s takes %s, got %s: %s", name, takes, got, hint),
      ("upstream offers %" GST_PTR_FORMAT, offered));
}

void
gst_cony_element_refuse_convertible (GstElement *element, gboolean *posted, const gchar *takes,
    const gchar *got, const GstCaps *offered, gboolean need_a, const gchar *a, gboolean need_b,
    const gchar *b)
{
  g_autofree gchar *hint = need_a && need_b ? g_strdup_printf ("add %s and %s before it", a, b)
      : need_a                              ? g_strdup_printf ("add %s before it", a)
      : need_b                              ? g_strdup_printf ("add %s before it", b)
                                            : g_strdup_printf ("add %s ! %s before it", b, a);
  gst_cony_element_refuse_caps (element, posted, takes, got, hint, offered);
}

void
gst_cony_element_refuse_tokens (GstElement *element, gboolean *posted, guint dim,
    const GstCaps *caps, const gchar *why)
{
  g_autofree gchar *takes =
      g_strdup_printf ("%u-float tokens (other/tensors, float32, dimensions=%u:K)", dim, dim);
  GString *got = g_string_new (NULL);
  if (caps == NULL || gst_caps_is_empty (caps)) {
    g_string_append (got, "no caps");
  } else {
    const GstStructure *s = gst_caps_get_structure (caps, 0);
    g_string_append (got, gst_structure_get_name (s));
    const gchar *fields[] = { "types", "dimensions", "framerate" };
    for (guint i = 0; i < G_N_ELEMENTS (fields); i++) {
      g_autofree gchar *v = gst_cony_element_fixed_field (s, fields[i]);
      if (v)
        g_string_append_printf (got, " %s=%s", fields[i], v);
    }
  }
  gst_cony_element_refuse_caps (element, posted, takes, got->str, why, caps);
  g_string_free (got, TRUE);
}

void
gst_cony_element_name_token_refusal (GstElement *element, gboolean *posted, guint dim,
    GstQuery *query)
{
  const GstCaps *offered = gst_cony_element_refused_caps (query);
  if (offered == NULL)
    return;
  GstConyTokenInfo info;
  gchar *why = NULL;
  if (gst_cony_tokens_info_from_caps (&info, offered, &why))
    why = g_strdup ("not float32 other/tensors with one static tensor");
  gst_cony_element_refuse_tokens (element, posted, dim, offered, why);
  g_free (why);
}

gchar *
gst_cony_element_fixed_field (const GstStructure *s, const gchar *field)
{
  const GValue *v = gst_structure_get_value (s, field);
  if (v == NULL || !gst_value_is_fixed (v))
    return NULL;
  if (G_VALUE_HOLDS_STRING (v))
    return g_value_dup_string (v);
  return gst_value_serialize (v);
}

gboolean
gst_cony_element_map_units (GstElement *element, GstBuffer *buf, GstMapInfo *map, gsize unit,
    const gchar *unit_name, const gchar *text)
{
  if (!gst_buffer_map (buf, map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (element, RESOURCE, READ, (NULL), ("could not map the input buffer"));
    return FALSE;
  }
  if (map->size % unit == 0)
    return TRUE;
  /* A partial unit would shift every later one. */
  GST_ELEMENT_ERROR (element, STREAM, FORMAT, ("%s", text ? text : ""),
      ("buffer of %" G_GSIZE_FORMAT " bytes is not a whole number of %s", map->size, unit_name));
  gst_buffer_unmap (buf, map);
  return FALSE;
}

gboolean
gst_cony_element_push_caps (GstPad *srcpad, GstCaps *caps)
{
  if (caps == NULL)
    return FALSE;
  gboolean ok = gst_pad_push_event (srcpad, gst_event_new_caps (caps));
  gst_caps_unref (caps);
  return ok;
}

gboolean
gst_cony_element_answer_caps (GstQuery *query, GstCaps *caps)
{
  GstCaps *filter;

  gst_query_parse_caps (query, &filter);
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full (filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (caps);
    caps = tmp;
  }
  gst_query_set_caps_result (query, caps);
  gst_caps_unref (caps);
  return TRUE;
}

void
gst_cony_element_stamp (GstBuffer *out, GstClockTime pts, GstClockTime duration, guint64 offset,
    guint64 n, gboolean *discont)
{
  GST_BUFFER_PTS (out) = pts;
  GST_BUFFER_DTS (out) = GST_CLOCK_TIME_NONE;
  GST_BUFFER_DURATION (out) = duration;
  GST_BUFFER_OFFSET (out) = offset;
  GST_BUFFER_OFFSET_END (out) = offset + n;
  if (*discont) {
    GST_BUFFER_FLAG_SET (out, GST_BUFFER_FLAG_DISCONT);
    *discont = FALSE;
  }
}

gboolean
gst_cony_element_run_starts (gboolean *in_run, gboolean bad)
{
  gboolean starts = bad && !*in_run;
  *in_run = bad;
  return starts;
}
