/* The level meta (plugin-internal): the audio level behind each token of a buffer, for
 * the level gate (docs/elements.md, "Level gate"). conymel attaches the mean square of
 * each log-mel frame's hop; conyvggish, with min-level set, the mean square over each
 * output token's CNN window and whether the window was below the gate (no CNN ran; the
 * token is zeros); conytransformer reports a gated token's step as below the gate. */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

typedef struct {
  GstMeta meta;
  guint n;         /* tokens of the buffer */
  gdouble *power;  /* n: mean square of the samples behind each token (samples in [-1, 1)) */
  gboolean *gated; /* n: TRUE where the token's window was below the gate */
} GstConyLevelMeta;

GType gst_cony_level_meta_api_get_type (void);
#define GST_CONY_LEVEL_META_API_TYPE (gst_cony_level_meta_api_get_type ())

/* Adds a meta of @n tokens (copies @power and @gated; @gated NULL: none gated). */
GstConyLevelMeta *gst_buffer_add_cony_level_meta (GstBuffer *buffer, guint n, const gdouble *power,
    const gboolean *gated);

static inline GstConyLevelMeta *
gst_buffer_get_cony_level_meta (GstBuffer *buffer)
{
  return (GstConyLevelMeta *) gst_buffer_get_meta (buffer, GST_CONY_LEVEL_META_API_TYPE);
}

/* @power in dBFS (10 log10; -inf for digital silence). */
gdouble gst_cony_level_db (gdouble power);

G_END_DECLS
