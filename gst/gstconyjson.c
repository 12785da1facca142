/* conyjson: classification metas -> JSON lines.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conyjson
 * @title: conyjson
 * @short_description: one JSON line per classification result
 *
 * conyjson turns every #GstConyClassificationMeta on its input buffers (the
 * results #GstConyTransformer attaches) into one line of JSON: one UTF-8
 * object per line, newline-terminated, one output buffer per result, in step
 * order (JSON Lines). Buffers without a classification meta produce nothing;
 * the input data itself is not passed on. The output caps are
 * `application/x-json`, so a `filesink` (or `fdsink`, an `appsink`...) can
 * take the lines as they are.
 *
 * Every record has a `type` and, when the #GstConyJson:source property is
 * set, `source`. A `stream` record (`stream`: the fields of the input caps:
 * media type, `dimensions`, `framerate`, `lookahead`, ... ; fractions as
 * "n/d" strings) comes before the first result and again when the caps
 * change. An `eos` record (`step`, `events`) carries the offsets of the
 * segments EOS closed. Each `result` record carries the fields of the result
 * table (gstconyresult.h), as the custom meta and conytransformer's messages do:
 * `step`, `pts`, the span of input the result covers as `start`, `end`,
 * `duration` and in running and stream time, `output`, the top class (`class_id`,
 * `label`, `score`), `top`, `context_fill`, `events` and, with
 * #GstConyJson:scores, `scores` (every class); a step below conyvggish's level
 * gate has `gated`: true and no class fields. JSON comes from one formatter
 * (gstconyresult-json.c), which conymqttsink uses too.
 * Times are integer nanoseconds, null when unknown. docs/results.schema.json
 * is the JSON Schema of the records; docs/elements.md documents every field
 * and compares the record with DL Streamer's.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=a.wav ! decodebin ! audioconvert ! audioresample ! conymel preset=yamnet ! conyvggish model=models/audio/yamnet-adapted.safetensors output=embedding ! conytransformer model=models/audio/transformer.safetensors top-k=3 ! conyjson source=a.wav ! filesink location=out.jsonl
 * ]| writes one JSON line per step (four a second) of a.wav to out.jsonl.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyjson.h"
#include "gstconyresult.h"
#include "gstconyelement.h"

#include <math.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_json_debug);
#define GST_CAT_DEFAULT gst_cony_json_debug

#define DEFAULT_SOURCE NULL
#define DEFAULT_SCORES FALSE

enum
{
  PROP_0,
  PROP_SOURCE,
  PROP_SCORES,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC,
    GST_PAD_ALWAYS, GST_STATIC_CAPS ("application/x-json"));

#define gst_cony_json_parent_class parent_class
G_DEFINE_TYPE (GstConyJson, gst_cony_json, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE (conyjson, "conyjson", GST_RANK_NONE, GST_TYPE_CONY_JSON);

/* ------------------------------------------------------------------------ */
/* Records: the JSON formatter (gstconyresult-json.c) over structures */

/* The fields of the "stream" record of @caps: `stream`, the media type and every
 * field of the caps. */
static GstStructure *
gst_cony_json_stream_fields (const GstCaps *caps)
{
  GstStructure *stream = gst_structure_new_empty ("stream");
  if (gst_caps_get_size (caps) > 0) {
    const GstStructure *c = gst_caps_get_structure (caps, 0);
    gst_structure_set (stream, "media", G_TYPE_STRING, gst_structure_get_name (c), NULL);
    for (gint i = 0; i < gst_structure_n_fields (c); i++) {
      const gchar *name = gst_structure_nth_field_name (c, i);
      gst_structure_set_value (stream, name, gst_structure_get_value (c, name));
    }
  }
  GstStructure *rec = gst_structure_new_empty ("stream");
  GValue v = G_VALUE_INIT;
  g_value_init (&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed (&v, stream);
  gst_structure_take_value (rec, "stream", &v);
  return rec;
}

/* The record of @type with the fields of @s (taken), without the trailing newline. */
static GString *
gst_cony_json_record (const gchar *type, const gchar *source, GstStructure *s)
{
  GString *line = g_string_new (NULL);
  gst_cony_result_json_append_record (line, type, source, s);
  gst_structure_free (s);
  return line;
}

/* One result record (the result table's fields; `scores` only when asked), without
 * the trailing newline. */
static GString *
gst_cony_json_result_record (const GstConyClassificationMeta *m, const gchar *source,
    gboolean scores)
{
  GstStructure *s = gst_cony_result_to_structure (m, "result");
  if (!scores)
    gst_structure_remove_field (s, "scores");
  return gst_cony_json_record ("result", source, s);
}

/* ------------------------------------------------------------------------ */

static gint
gst_cony_json_cmp_step (gconstpointer a, gconstpointer b)
{
  const GstConyClassificationMeta *x = *(GstConyClassificationMeta *const *) a;
  const GstConyClassificationMeta *y = *(GstConyClassificationMeta *const *) b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* Pushes @line (a record without its newline; taken) as one buffer. */
static GstFlowReturn
gst_cony_json_push_line (GstConyJson *self, GString *line, GstClockTime pts, gboolean discont)
{
  g_string_append_c (line, '\n');
  gsize len = line->len;
  GstBuffer *out = gst_buffer_new_wrapped (g_string_free (line, FALSE), len);
  GST_BUFFER_PTS (out) = pts;
  if (discont)
    GST_BUFFER_FLAG_SET (out, GST_BUFFER_FLAG_DISCONT);
  return gst_pad_push (self->srcpad, out);
}

/* The "stream" record, before the first result of a stream and after caps
 * that change it: not repeated on every line. */
static GstFlowReturn
gst_cony_json_push_stream (GstConyJson *self, const gchar *source, GstClockTime pts)
{
  if (self->stream == NULL
      || (self->stream_written && gst_structure_is_equal (self->stream, self->stream_written)))
    return GST_FLOW_OK;
  GString *line = gst_cony_json_record ("stream", source, gst_structure_copy (self->stream));
  g_clear_pointer (&self->stream_written, gst_structure_free);
  self->stream_written = gst_structure_copy (self->stream);
  return gst_cony_json_push_line (self, line, pts, FALSE);
}

static GstFlowReturn
gst_cony_json_chain (GstPad *pad, GstObject *parent, GstBuffer *buf)
{
  GstConyJson *self = GST_CONY_JSON (parent);
  GPtrArray *metas = g_ptr_array_new ();
  gpointer state = NULL;
  GstMeta *meta;
  gchar *source;
  gboolean scores;
  GstFlowReturn ret = GST_FLOW_OK;

  while (
      (meta = gst_buffer_iterate_meta_filtered (buf, &state, GST_CONY_CLASSIFICATION_META_API_TYPE))
      != NULL)
    g_ptr_array_add (metas, meta);
  if (metas->len == 0) {
    GST_LOG_OBJECT (self, "no classification meta on %" GST_PTR_FORMAT, buf);
    goto done;
  }
  g_ptr_array_sort (metas, gst_cony_json_cmp_step);

  GST_OBJECT_LOCK (self);
  source = g_strdup (self->source);
  scores = self->scores;
  GST_OBJECT_UNLOCK (self);

  ret = gst_cony_json_push_stream (self, source, GST_BUFFER_PTS (buf));
  for (guint i = 0; i < metas->len && ret == GST_FLOW_OK; i++) {
    const GstConyClassificationMeta *m = metas->pdata[i];
    GString *line = gst_cony_json_result_record (m, source, scores);
    ret = gst_cony_json_push_line (self, line,
        GST_CLOCK_TIME_IS_VALID (m->pts) ? m->pts : GST_BUFFER_PTS (buf),
        i == 0 && GST_BUFFER_IS_DISCONT (buf));
  }
  g_free (source);

done:
  g_ptr_array_free (metas, TRUE);
  gst_buffer_unref (buf);
  return ret;
}

/* conytransformer's segments-closed event (sent before EOS): an "eos"
 * record with the offsets of the segments EOS closed. */
static void
gst_cony_json_write_closed_segments (GstConyJson *self, GstEvent *event)
{
  GstConyClassificationEvent *events;
  guint64 step;
  guint n;

  if (!gst_cony_segments_closed_event_parse (event, &step, &events, &n))
    return;
  GST_OBJECT_LOCK (self);
  gchar *source = g_strdup (self->source);
  GST_OBJECT_UNLOCK (self);
  GstStructure *s = gst_structure_new ("eos", "step", G_TYPE_UINT64, step, NULL);
  GValue ev = G_VALUE_INIT;
  gst_cony_result_events_value (&ev, events, n);
  gst_structure_take_value (s, "events", &ev);
  GString *line = gst_cony_json_record ("eos", source, s);
  GstFlowReturn ret = gst_cony_json_push_line (self, line, GST_CLOCK_TIME_NONE, FALSE);
  GST_DEBUG_OBJECT (self, "%u segments closed at EOS: %s", n, gst_flow_get_name (ret));
  g_free (events);
  g_free (source);
}

static gboolean
gst_cony_json_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstConyJson *self = GST_CONY_JSON (parent);

  if (GST_EVENT_TYPE (event) == GST_EVENT_CUSTOM_DOWNSTREAM)
    gst_cony_json_write_closed_segments (self, event);
  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS) {
    GstCaps *caps;
    gst_event_parse_caps (event, &caps);
    g_clear_pointer (&self->stream, gst_structure_free);
    self->stream = gst_cony_json_stream_fields (caps);
    GST_DEBUG_OBJECT (self, "stream: %" GST_PTR_FORMAT, self->stream);
    gst_event_unref (event);
    if (gst_pad_has_current_caps (self->srcpad))
      return TRUE;
    return gst_cony_element_push_caps (self->srcpad,
        gst_static_pad_template_get_caps (&src_template));
  }
  return gst_pad_event_default (pad, parent, event);
}

static GstStateChangeReturn
gst_cony_json_change_state (GstElement *element, GstStateChange transition)
{
  GstConyJson *self = GST_CONY_JSON (element);
  GstStateChangeReturn ret = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    g_clear_pointer (&self->stream, gst_structure_free);
    g_clear_pointer (&self->stream_written, gst_structure_free);
  }
  return ret;
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_json_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  GstConyJson *self = GST_CONY_JSON (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_SOURCE:
      g_free (self->source);
      self->source = g_value_dup_string (value);
      break;
    case PROP_SCORES: self->scores = g_value_get_boolean (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_json_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyJson *self = GST_CONY_JSON (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_SOURCE: g_value_set_string (value, self->source); break;
    case PROP_SCORES: g_value_set_boolean (value, self->scores); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_json_finalize (GObject *object)
{
  GstConyJson *self = GST_CONY_JSON (object);

  g_free (self->source);
  g_clear_pointer (&self->stream, gst_structure_free);
  g_clear_pointer (&self->stream_written, gst_structure_free);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_json_class_init (GstConyJsonClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags playing = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_PLAYING;

  GST_DEBUG_CATEGORY_INIT (gst_cony_json_debug, "conyjson", 0,
      "Classification results as JSON lines");

  gobject_class->set_property = gst_cony_json_set_property;
  gobject_class->get_property = gst_cony_json_get_property;
  gobject_class->finalize = gst_cony_json_finalize;
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_cony_json_change_state);

  /**
   * GstConyJson:source:
   *
   * A name for the input (a file, URI or device), written as `source` in
   * every record when set.
   */
  g_object_class_install_property (gobject_class, PROP_SOURCE,
      g_param_spec_string ("source", "Source",
          "Name of the input (file, URI, device) written into every record", DEFAULT_SOURCE,
          playing));
  /**
   * GstConyJson:scores:
   *
   * Also write `scores`, the score of every class in class order (the top-k
   * of conytransformer's top-k property is always written).
   */
  g_object_class_install_property (gobject_class, PROP_SCORES,
      g_param_spec_boolean ("scores", "Scores", "Also write the score of every class",
          DEFAULT_SCORES, playing));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "Classification results to JSON",
      "Formatter/Metadata",
      "Writes one JSON line per conytransformer result (classification meta) on its input",
      "gst-cony authors");
  gst_cony_classification_meta_get_info ();
}

static void
gst_cony_json_init (GstConyJson *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_json_chain));
  gst_pad_set_event_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_cony_json_sink_event));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->scores = DEFAULT_SCORES;
}
