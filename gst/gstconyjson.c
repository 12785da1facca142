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
 * segments EOS closed. Each `result` record carries `step`,
 * `pts`, the span of input the result covers as `start`, `end`, `duration`
 * (buffer time) and `running_start`, `running_end`, `stream_start`,
 * `stream_end`, then `output` ("softmax" or "sigmoid"), `class_id`, `label`,
 * `score`, `top` (the top-k: objects with `class_id`, `label`, `score`, best
 * first), `context_fill`, `events` (the segment onsets and offsets of the
 * step: `event`, `class_id`, `label`, `segment_start`, `segment_end`,
 * running times) and, with #GstConyJson:scores, `scores` (every class).
 * A step below conyvggish's level gate (min-level) gives a result record with
 * `gated`: true, its times, `output` and `events`, and no class fields.
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
#include "gstconymeta.h"
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
/* JSON text */

static void
gst_cony_json_json_string (GString *o, const gchar *s)
{
  g_string_append_c (o, '"');
  for (const guchar *p = (const guchar *) (s ? s : ""); *p; p++) {
    switch (*p) {
      case '"': g_string_append (o, "\\\""); break;
      case '\\': g_string_append (o, "\\\\"); break;
      case '\n': g_string_append (o, "\\n"); break;
      case '\r': g_string_append (o, "\\r"); break;
      case '\t': g_string_append (o, "\\t"); break;
      default:
        if (*p < 0x20)
          g_string_append_printf (o, "\\u%04x", *p);
        else
          g_string_append_c (o, (gchar) *p);
    }
  }
  g_string_append_c (o, '"');
}

/* "key": */
static void
gst_cony_json_json_key (GString *o, const gchar *key)
{
  if (o->len > 0 && o->str[o->len - 1] != '{' && o->str[o->len - 1] != '[')
    g_string_append_c (o, ',');
  gst_cony_json_json_string (o, key);
  g_string_append_c (o, ':');
}

static void
gst_cony_json_json_time (GString *o, const gchar *key, GstClockTime t)
{
  gst_cony_json_json_key (o, key);
  if (GST_CLOCK_TIME_IS_VALID (t))
    g_string_append_printf (o, "%" G_GUINT64_FORMAT, (guint64) t);
  else
    g_string_append (o, "null");
}

/* Scores in float precision (7 significant digits); non-finite: null. */
static void
gst_cony_json_json_number (GString *o, gdouble v)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (isfinite (v))
    g_string_append (o, g_ascii_formatd (buf, sizeof buf, "%.7g", v));
  else
    g_string_append (o, "null");
}

static void
gst_cony_json_json_class (GString *o, gint class_id, const gchar *label, gdouble score)
{
  gst_cony_json_json_key (o, "class_id");
  g_string_append_printf (o, "%d", class_id);
  gst_cony_json_json_key (o, "label");
  gst_cony_json_json_string (o, label);
  gst_cony_json_json_key (o, "score");
  gst_cony_json_json_number (o, score);
}

static gboolean
gst_cony_json_caps_field (GQuark field, const GValue *value, gpointer user_data)
{
  GString *o = user_data;
  GType t = G_VALUE_TYPE (value);

  gst_cony_json_json_key (o, g_quark_to_string (field));
  if (t == G_TYPE_INT)
    g_string_append_printf (o, "%d", g_value_get_int (value));
  else if (t == G_TYPE_UINT)
    g_string_append_printf (o, "%u", g_value_get_uint (value));
  else if (t == G_TYPE_INT64)
    g_string_append_printf (o, "%" G_GINT64_FORMAT, g_value_get_int64 (value));
  else if (t == G_TYPE_UINT64)
    g_string_append_printf (o, "%" G_GUINT64_FORMAT, g_value_get_uint64 (value));
  else if (t == G_TYPE_DOUBLE)
    gst_cony_json_json_number (o, g_value_get_double (value));
  else if (t == G_TYPE_BOOLEAN)
    g_string_append (o, g_value_get_boolean (value) ? "true" : "false");
  else if (t == G_TYPE_STRING)
    gst_cony_json_json_string (o, g_value_get_string (value));
  else {
    /* fractions ("4/1"), lists, ...: GStreamer's own text */
    gchar *text = gst_value_serialize (value);
    gst_cony_json_json_string (o, text);
    g_free (text);
  }
  return TRUE;
}

/* The "stream" object of @caps: the media type and every field. */
static gchar *
gst_cony_json_stream_json (const GstCaps *caps)
{
  GString *o = g_string_new ("{");
  if (gst_caps_get_size (caps) > 0) {
    const GstStructure *s = gst_caps_get_structure (caps, 0);
    gst_cony_json_json_key (o, "media");
    gst_cony_json_json_string (o, gst_structure_get_name (s));
    gst_structure_foreach (s, gst_cony_json_caps_field, o);
  }
  g_string_append_c (o, '}');
  return g_string_free (o, FALSE);
}

/* "events": [...], the segment events of a step or of EOS. */
static void
gst_cony_json_json_events (GString *o, const GstConyClassificationEvent *events, guint n)
{
  gst_cony_json_json_key (o, "events");
  g_string_append_c (o, '[');
  for (guint i = 0; i < n; i++) {
    const GstConyClassificationEvent *e = &events[i];
    if (i > 0)
      g_string_append_c (o, ',');
    g_string_append_c (o, '{');
    gst_cony_json_json_key (o, "event");
    gst_cony_json_json_string (o, e->onset ? "onset" : "offset");
    gst_cony_json_json_key (o, "class_id");
    g_string_append_printf (o, "%d", e->class_id);
    gst_cony_json_json_key (o, "label");
    gst_cony_json_json_string (o, e->label);
    gst_cony_json_json_time (o, "segment_start", e->start);
    gst_cony_json_json_time (o, "segment_end", e->end);
    g_string_append_c (o, '}');
  }
  g_string_append_c (o, ']');
}

/* {"type":TYPE[,"source":SOURCE]: the head of every record (docs/
 * results.schema.json). */
static void
gst_cony_json_open_record (GString *o, const gchar *type, const gchar *source)
{
  g_string_append_c (o, '{');
  gst_cony_json_json_key (o, "type");
  gst_cony_json_json_string (o, type);
  if (source) {
    gst_cony_json_json_key (o, "source");
    gst_cony_json_json_string (o, source);
  }
}

/* One result record, without the trailing newline. */
static void
gst_cony_json_write_record (GstConyJson *self, GString *o, const GstConyClassificationMeta *m,
    const gchar *source, gboolean scores)
{
  gst_cony_json_open_record (o, "result", source);
  gst_cony_json_json_key (o, "step");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, m->step);
  gst_cony_json_json_time (o, "pts", m->pts);
  gst_cony_json_json_time (o, "start", m->window_start);
  gst_cony_json_json_time (o, "end", m->window_end);
  gst_cony_json_json_time (o, "duration",
      GST_CLOCK_TIME_IS_VALID (m->window_start) && GST_CLOCK_TIME_IS_VALID (m->window_end)
          ? m->window_end - m->window_start
          : GST_CLOCK_TIME_NONE);
  gst_cony_json_json_time (o, "running_start", m->running_start);
  gst_cony_json_json_time (o, "running_end", m->running_end);
  gst_cony_json_json_time (o, "stream_start", m->stream_start);
  gst_cony_json_json_time (o, "stream_end", m->stream_end);
  gst_cony_json_json_key (o, "output");
  gst_cony_json_json_string (o, m->multi_label ? "sigmoid" : "softmax");
  if (m->gated) {
    /* below the level gate: no class, no scores (docs/elements.md, "Level gate") */
    gst_cony_json_json_key (o, "gated");
    g_string_append (o, "true");
    gst_cony_json_json_events (o, m->events, m->n_events);
    g_string_append_c (o, '}');
    return;
  }
  gst_cony_json_json_class (o, m->class_id, m->label, m->score);
  gst_cony_json_json_key (o, "top");
  g_string_append_c (o, '[');
  for (guint i = 0; i < m->n_top; i++) {
    if (i > 0)
      g_string_append_c (o, ',');
    g_string_append_c (o, '{');
    gint c = m->top_ids[i];
    gst_cony_json_json_class (o, c, m->top_labels[i],
        c >= 0 && (guint) c < m->n_scores ? m->scores[c] : NAN);
    g_string_append_c (o, '}');
  }
  g_string_append_c (o, ']');
  gst_cony_json_json_key (o, "context_fill");
  gst_cony_json_json_number (o, m->context_fill);
  gst_cony_json_json_events (o, m->events, m->n_events);
  if (scores) {
    gst_cony_json_json_key (o, "scores");
    g_string_append_c (o, '[');
    for (guint i = 0; i < m->n_scores; i++) {
      if (i > 0)
        g_string_append_c (o, ',');
      gst_cony_json_json_number (o, m->scores[i]);
    }
    g_string_append_c (o, ']');
  }
  g_string_append_c (o, '}');
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
  if (self->stream_json == NULL || g_strcmp0 (self->stream_json, self->stream_written) == 0)
    return GST_FLOW_OK;
  GString *line = g_string_new (NULL);
  gst_cony_json_open_record (line, "stream", source);
  gst_cony_json_json_key (line, "stream");
  g_string_append (line, self->stream_json);
  g_string_append_c (line, '}');
  g_free (self->stream_written);
  self->stream_written = g_strdup (self->stream_json);
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
    GString *line = g_string_new (NULL);
    gst_cony_json_write_record (self, line, m, source, scores);
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
  GString *line = g_string_new (NULL);
  gst_cony_json_open_record (line, "eos", source);
  gst_cony_json_json_key (line, "step");
  g_string_append_printf (line, "%" G_GUINT64_FORMAT, step);
  gst_cony_json_json_events (line, events, n);
  g_string_append_c (line, '}');
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
    g_free (self->stream_json);
    self->stream_json = gst_cony_json_stream_json (caps);
    GST_DEBUG_OBJECT (self, "stream: %s", self->stream_json);
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
    g_clear_pointer (&self->stream_json, g_free);
    g_clear_pointer (&self->stream_written, g_free);
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
  g_free (self->stream_json);
  g_free (self->stream_written);
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
