/* The one description of a classification result: its fields (names, types, when
 * present) in a table, and the formatters over it. conytransformer fills a
 * #GstConyClassificationMeta from a step; the custom meta, the bus message and
 * conyjson's JSON all come from gst_cony_result_to_structure(), so they carry the
 * same fields under the same names: docs/results.schema.json's.
 *
 * A new result field: a member of #GstConyClassificationMeta (gstconymeta.h), a row
 * in the table (gstconyresult.c), its value in conytransformer's
 * gst_cony_transformer_fill_result() (gstconytransformer-messages.c), and its entry
 * in docs/results.schema.json and docs/elements.md. A new output format: a
 * formatter over gst_cony_result_to_structure() (as gstconyresult-json.c).
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include "gstconymeta.h"

G_BEGIN_DECLS

/* How a field's value is held (in the GstStructure: the GType in brackets). */
typedef enum
{
  GST_CONY_RESULT_COUNT,    /* guint64 */
  GST_CONY_RESULT_TIME,     /* guint64 ns; GST_CLOCK_TIME_NONE when unknown (JSON null) */
  GST_CONY_RESULT_INT,      /* gint */
  GST_CONY_RESULT_STRING,   /* string */
  GST_CONY_RESULT_BOOLEAN,  /* gboolean */
  GST_CONY_RESULT_SCORE,    /* gfloat */
  GST_CONY_RESULT_FRACTION, /* gdouble */
  GST_CONY_RESULT_SCORES,   /* GST_TYPE_ARRAY of gfloat */
  GST_CONY_RESULT_CLASSES,  /* GST_TYPE_ARRAY of "class" structures (class fields) */
  GST_CONY_RESULT_EVENTS,   /* GST_TYPE_ARRAY of "event" structures (event fields) */
} GstConyResultType;

/* When a field is present: always, only in results with a class, or only in results
 * below conyvggish's level gate (docs/elements.md, "Level gate"). */
typedef enum
{
  GST_CONY_RESULT_ALWAYS,
  GST_CONY_RESULT_CLASSIFIED,
  GST_CONY_RESULT_GATED,
} GstConyResultPresence;

typedef struct {
  const gchar *name; /* in every output: docs/results.schema.json's name */
  GstConyResultType type;
  GstConyResultPresence presence;
  gssize offset;                                /* of a member read as @type; -1: @get */
  void (*get) (gconstpointer record, GValue *); /* a derived value (initialises the GValue) */
  const gchar *blurb;                           /* one line, for listings */
} GstConyResultField;

/* One entry of a result's top-k: the record the class fields describe. */
typedef struct {
  gint class_id;
  const gchar *label;
  gfloat score;
} GstConyResultClass;

/* The fields of a result (of a #GstConyClassificationMeta), in output order. */
const GstConyResultField *gst_cony_result_fields (guint *n_fields);

/* The fields of each `top` entry (a #GstConyResultClass). */
const GstConyResultField *gst_cony_result_class_fields (guint *n_fields);

/* The fields of each `events` entry (a #GstConyClassificationEvent). */
const GstConyResultField *gst_cony_result_event_fields (guint *n_fields);

/* Sets every field of @result (gated or not decides which) on @s. */
void gst_cony_result_set_fields (GstStructure *s, const GstConyClassificationMeta *result);

/* A new structure named @name with every field of @result: the custom meta's, the bus
 * message's and (gstconyresult-json.c) the JSON record's content. */
GstStructure *gst_cony_result_to_structure (const GstConyClassificationMeta *result,
    const gchar *name);

/* A GST_TYPE_ARRAY of one "event" structure per event, into @value (uninitialised). */
void gst_cony_result_events_value (GValue *value, const GstConyClassificationEvent *events,
    guint n);

/* Reads one "event" structure into @e (label interned); FALSE when a field is missing. */
gboolean gst_cony_result_read_event (const GstStructure *s, GstConyClassificationEvent *e);

/* JSON (gstconyresult-json.c): the fields of @s as members of a JSON object appended to
 * @out, which already holds the object's opening brace and maybe members. Values by
 * type: numbers, booleans, strings (one escaping function), GST_TYPE_ARRAY as arrays,
 * structures as objects; a guint64 equal to GST_CLOCK_TIME_NONE (an unknown time) and
 * non-finite numbers as null; floats and doubles to 7 significant digits (the scores'
 * float precision); other types as GStreamer serialises them, as strings ("4/1"). */
void gst_cony_result_json_append_fields (GString *out, const GstStructure *s);

/* A JSON string of @s (NULL: "") appended to @out. */
void gst_cony_result_json_append_string (GString *out, const gchar *s);

/* Appends the JSON record `{"type":TYPE[,"source":SOURCE],...the fields of @s}` (no
 * newline) to @out. */
void gst_cony_result_json_append_record (GString *out, const gchar *type, const gchar *source,
    const GstStructure *s);

G_END_DECLS
