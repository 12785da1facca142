/* The model plumbing of the two CNN elements (gstconycnnelement.h). */
#include "gstconycnnelement.h"
#include "gstconyelement.h"

GType
gst_cony_vggish_output_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_CONY_VGGISH_OUTPUT_SCORES,
        "The network's last layer (VGGish: its embedding; YAMNet: 521 scores)", "scores" },
    { GST_CONY_VGGISH_OUTPUT_EMBEDDING,
        "The global average pool before the FC head (YAMNet: 1024-d)", "embedding" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyVggishOutput", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_cony_vggish_precision_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_CONY_VGGISH_PRECISION_AUTO,
        "int8 for files with int8 activation quantisation (YAMNet), else float", "auto" },
    { GST_CONY_VGGISH_PRECISION_FLOAT, "The float engine, whatever the file", "float" },
    { GST_CONY_VGGISH_PRECISION_INT8, "int8 inference (the file must be quantised)", "int8" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstConyVggishPrecision", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static void
free_cnn (GstElement *element, ConyCnn **slot)
{
  GST_OBJECT_LOCK (element);
  ConyCnn *cnn = g_steal_pointer (slot);
  GST_OBJECT_UNLOCK (element);
  cony_cnn_free (cnn);
}

/* Loads @path into *@slot, shared with every other load of the same file in the process
 * (cony_cnn_load()); on failure posts "Could not load the model" and returns FALSE. The
 * pointer changes under the object lock, where model-users reads it. */
static gboolean
load_cnn (GstElement *element, ConyCnn **slot, const gchar *path)
{
  GError *error = NULL;
  ConyCnn *cnn = cony_cnn_load (path, &error);
  free_cnn (element, slot);
  GST_OBJECT_LOCK (element);
  *slot = cnn;
  GST_OBJECT_UNLOCK (element);
  gboolean ok = gst_cony_element_check_loaded (element, cnn != NULL, path, error);
  g_clear_error (&error);
  return ok;
}

static void
install_model_users (GObjectClass *klass, guint prop_id)
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

/* Object lock held: users of @cnn's weights, 0 for NULL. */
static guint
model_users (const ConyCnn *cnn)
{
  return cnn ? cony_cnn_get_weights_users (cnn) : 0;
}

void
gst_cony_cnn_element_install_properties (GObjectClass *klass, guint first_prop,
    const GstConyCnnElementInfo *info)
{
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
  g_object_class_install_property (klass, first_prop + GST_CONY_CNN_PROP_MODEL,
      g_param_spec_string ("model", "Model", info->model_blurb, NULL, flags));
  g_object_class_install_property (klass, first_prop + GST_CONY_CNN_PROP_OUTPUT,
      g_param_spec_enum ("output", "Output", info->output_blurb, GST_TYPE_CONY_VGGISH_OUTPUT,
          GST_CONY_VGGISH_OUTPUT_SCORES, flags));
  install_model_users (klass, first_prop + GST_CONY_CNN_PROP_MODEL_USERS);
  if (!info->precision)
    return;
  g_object_class_install_property (klass, first_prop + GST_CONY_CNN_PROP_PRECISION,
      g_param_spec_enum ("precision", "Precision",
          "CNN arithmetic: auto (the file decides), float, or int8 (quantised files only)",
          GST_TYPE_CONY_VGGISH_PRECISION, GST_CONY_VGGISH_PRECISION_AUTO, flags));
  g_object_class_install_property (klass, first_prop + GST_CONY_CNN_PROP_PRECISION_IN_USE,
      g_param_spec_string ("precision-in-use", "Precision in use",
          "What the CNN runs once started: int8 (which layers, which kernels) or float", NULL,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

void
gst_cony_cnn_element_init (GstConyCnnElement *net, guint first_prop,
    const GstConyCnnElementInfo *info)
{
  net->first_prop = first_prop;
  net->info = info;
  net->model = NULL;
  net->output = net->output_in_use = GST_CONY_VGGISH_OUTPUT_SCORES;
  net->precision = GST_CONY_VGGISH_PRECISION_AUTO;
}

static gboolean
set_locked (GstConyCnnElement *net, guint prop_id, const GValue *value)
{
  switch (prop_id - net->first_prop) {
    case GST_CONY_CNN_PROP_MODEL:
      g_free (net->model);
      net->model = g_value_dup_string (value);
      return TRUE;
    case GST_CONY_CNN_PROP_OUTPUT: net->output = g_value_get_enum (value); return TRUE;
    case GST_CONY_CNN_PROP_PRECISION: net->precision = g_value_get_enum (value); return TRUE;
    default: return FALSE;
  }
}

static gboolean
get_locked (GstConyCnnElement *net, guint prop_id, GValue *value)
{
  switch (prop_id - net->first_prop) {
    case GST_CONY_CNN_PROP_MODEL: g_value_set_string (value, net->model); return TRUE;
    case GST_CONY_CNN_PROP_OUTPUT: g_value_set_enum (value, net->output); return TRUE;
    case GST_CONY_CNN_PROP_MODEL_USERS:
      g_value_set_uint (value, model_users (net->cnn));
      return TRUE;
    case GST_CONY_CNN_PROP_PRECISION: g_value_set_enum (value, net->precision); return TRUE;
    case GST_CONY_CNN_PROP_PRECISION_IN_USE:
      g_value_take_string (value, net->cnn ? cony_cnn_describe_precision (net->cnn) : NULL);
      return TRUE;
    default: return FALSE;
  }
}

gboolean
gst_cony_cnn_element_set_property (GstElement *element, GstConyCnnElement *net, guint prop_id,
    const GValue *value)
{
  GST_OBJECT_LOCK (element);
  gboolean ours = set_locked (net, prop_id, value);
  GST_OBJECT_UNLOCK (element);
  return ours;
}

gboolean
gst_cony_cnn_element_get_property (GstElement *element, GstConyCnnElement *net, guint prop_id,
    GValue *value)
{
  GST_OBJECT_LOCK (element);
  gboolean ours = get_locked (net, prop_id, value);
  GST_OBJECT_UNLOCK (element);
  return ours;
}

gboolean
gst_cony_cnn_element_open (GstElement *element, GstConyCnnElement *net, gchar **path)
{
  GError *error = NULL;
  GST_OBJECT_LOCK (element);
  *path = g_strdup (net->model);
  GstConyVggishOutput output = net->output_in_use = net->output;
  GstConyVggishPrecision precision = net->precision;
  GST_OBJECT_UNLOCK (element);

  if (!gst_cony_element_find_model (element, path, net->info->model_hint)
      || !load_cnn (element, &net->cnn, *path))
    return FALSE;
  if (net->info->precision
      && !cony_cnn_set_precision (net->cnn, (ConyCnnPrecision) precision, &error)) {
    GST_ELEMENT_ERROR (element, LIBRARY, SETTINGS, ("precision: %s", error->message),
        ("model=%s", *path));
    goto fail;
  }
  if (!cony_cnn_set_output (net->cnn, (ConyCnnOutput) output, &error)) {
    GST_ELEMENT_ERROR (element, LIBRARY, SETTINGS, ("output=embedding: %s", error->message),
        ("model=%s", *path));
    goto fail;
  }
  if (!cony_cnn_ref_init_from_file (&net->source, *path,
          output == GST_CONY_VGGISH_OUTPUT_EMBEDDING ? "embedding" : "scores", &error)) {
    GST_ELEMENT_ERROR (element, RESOURCE, OPEN_READ,
        ("Could not read the model: %s", error->message), ("model=%s", *path));
    goto fail;
  }
  return TRUE;

fail:
  g_clear_error (&error);
  return FALSE;
}

void
gst_cony_cnn_element_close (GstElement *element, GstConyCnnElement *net)
{
  free_cnn (element, &net->cnn);
  cony_cnn_ref_clear (&net->source);
}

void
gst_cony_cnn_element_finalize (GstElement *element, GstConyCnnElement *net)
{
  gst_cony_cnn_element_close (element, net);
  g_clear_pointer (&net->model, g_free);
}
