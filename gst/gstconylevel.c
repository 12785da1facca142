/* The level meta (gstconylevel.h). */
#include "gstconylevel.h"

#include <math.h>
#include <string.h>

GType
gst_cony_level_meta_api_get_type (void)
{
  static GType type = 0;
  static const gchar *tags[] = { NULL }; /* tagless: survives every transform */
  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("GstConyLevelMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
gst_cony_level_meta_init (GstMeta *meta, gpointer params, GstBuffer *buffer)
{
  GstConyLevelMeta *m = (GstConyLevelMeta *) meta;
  m->n = 0;
  m->power = NULL;
  m->gated = NULL;
  return TRUE;
}

static void
gst_cony_level_meta_free (GstMeta *meta, GstBuffer *buffer)
{
  GstConyLevelMeta *m = (GstConyLevelMeta *) meta;
  g_free (m->power);
  g_free (m->gated);
}

static gboolean
gst_cony_level_meta_transform (GstBuffer *dest, GstMeta *meta, GstBuffer *buffer, GQuark type,
    gpointer data)
{
  GstConyLevelMeta *m = (GstConyLevelMeta *) meta;
  if (!GST_META_TRANSFORM_IS_COPY (type))
    return FALSE;
  return gst_buffer_add_cony_level_meta (dest, m->n, m->power, m->gated) != NULL;
}

static const GstMetaInfo *
gst_cony_level_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter (&info)) {
    const GstMetaInfo *mi = gst_meta_register (GST_CONY_LEVEL_META_API_TYPE, "GstConyLevelMeta",
        sizeof (GstConyLevelMeta), gst_cony_level_meta_init, gst_cony_level_meta_free,
        gst_cony_level_meta_transform);
    g_once_init_leave (&info, mi);
  }
  return info;
}

GstConyLevelMeta *
gst_buffer_add_cony_level_meta (GstBuffer *buffer, guint n, const gdouble *power,
    const gboolean *gated)
{
  GstConyLevelMeta *m = (GstConyLevelMeta *) gst_buffer_add_meta (buffer,
      gst_cony_level_meta_get_info (), NULL);
  m->n = n;
  m->power = g_memdup2 (power, n * sizeof (gdouble));
  m->gated = gated ? g_memdup2 (gated, n * sizeof (gboolean)) : g_new0 (gboolean, n);
  return m;
}

gdouble
gst_cony_level_db (gdouble power)
{
  return power > 0.0 ? 10.0 * log10 (power) : -INFINITY;
}
