/* conyjson: classification metas -> JSON lines.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/gst.h>

#include "gstconyelements.h"

G_BEGIN_DECLS

#define GST_TYPE_CONY_JSON (gst_cony_json_get_type ())
G_DECLARE_FINAL_TYPE (GstConyJson, gst_cony_json, GST, CONY_JSON, GstElement)

struct _GstConyJson {
  GstElement parent;

  GstPad *sinkpad;
  GstPad *srcpad;

  /* Properties (object lock), read per buffer. */
  gchar *source;
  gboolean scores;

  /* Streaming thread. */
  GstStructure *stream;         /* the "stream" record's fields of the input caps, or NULL */
  GstStructure *stream_written; /* the one last written, or NULL */
};

G_END_DECLS
