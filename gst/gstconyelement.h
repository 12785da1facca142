/* Plumbing shared by the cony elements (not a public API). */
#pragma once
#include "cony/cnn.h"

#include <gst/gst.h>

G_BEGIN_DECLS

typedef gboolean (*GstConyStartFunc) (GstElement *element);
typedef void (*GstConyStopFunc) (GstElement *element);

/* change_state for elements that build their libcony objects on READY→PAUSED (@start
 * posts its own error and returns FALSE to fail the change) and free them on
 * PAUSED→READY, or when the parent class fails the change after a successful start. */
GstStateChangeReturn gst_cony_element_change_state (GstElement *element, GstStateChange transition,
    GstElementClass *parent_class, GstConyStartFunc start, GstConyStopFunc stop);

/* Answers a LATENCY query on the source pad: upstream's latency (asked through
 * @sinkpad) plus @own, the element's own delay; GST_CLOCK_TIME_NONE adds nothing (the
 * delay is not known yet). FALSE when upstream does not answer. */
gboolean gst_cony_element_query_latency (GstElement *element, GstPad *sinkpad, GstQuery *query,
    GstClockTime own);

/* The CNN of conyvggish / conyframeembed, in *@slot, shared with every other load of
 * the same file in the process (cony_cnn_load()). load_cnn: for start, loads @path into
 * *@slot; on failure posts "Could not load the model" and returns FALSE. free_cnn: frees
 * it. Both change *@slot under the object lock, where the read-only "model-users"
 * property (install_model_users, read with model_users) looks at it. */
gboolean gst_cony_element_load_cnn (GstElement *element, ConyCnn **slot, const gchar *path);
void gst_cony_element_free_cnn (GstElement *element, ConyCnn **slot);
void gst_cony_element_install_model_users (GObjectClass *klass, guint prop_id);
/* For get_property, object lock held: users of @cnn's weights, 0 for NULL. */
guint gst_cony_element_model_users (const ConyCnn *cnn);

/* The CNN arithmetic of conyvggish and conyframeembed: the "precision" property
 * (GST_TYPE_CONY_PRECISION, the values of ConyCnnPrecision) and the read-only
 * "precision-in-use" (install_precision); set_precision applies it on start, posting
 * an error that names @path when the file cannot run it. */
#define GST_TYPE_CONY_PRECISION (gst_cony_precision_get_type ())
GType gst_cony_precision_get_type (void);
void gst_cony_element_install_precision (GObjectClass *klass, guint prop_precision,
    guint prop_in_use, GParamFlags flags);
gboolean gst_cony_element_set_precision (GstElement *element, ConyCnn *cnn,
    ConyCnnPrecision precision, const gchar *path);

/* For set_property: TRUE when @pspec may be set now. A property flagged
 * GST_PARAM_MUTABLE_READY (a model path, an attention variant, a geometry) is read on
 * READY→PAUSED only, so outside NULL/READY (or on the way out of them) it is refused:
 * a GST_WARNING_OBJECT names it and the state, and the caller keeps the old value, so
 * that reading it back tells what runs. Takes the object lock: call without it. */
gboolean gst_cony_element_property_settable (GObject *object, GParamSpec *pspec);

/* For start: replaces *@path (the 'model' property's value, newly allocated) by the
 * file it names (cony_model_path_find(): as given, $CONY_MODEL_PATH, the installed
 * models) and returns TRUE. Otherwise posts "No model file given: set model=@what"
 * (@what: what to give, naming the shipped default) or the lookup's error naming where
 * it looked, and returns FALSE. */
gboolean gst_cony_element_find_model (GstElement *element, gchar **path, const gchar *what);

/* For start, after loading @path: TRUE when @loaded; otherwise posts "Could not load
 * the model" with @error's message and the path, and returns FALSE. */
gboolean gst_cony_element_check_loaded (GstElement *element, gboolean loaded, const gchar *path,
    const GError *error);

/* For chain: TRUE when the input caps arrived (@have_caps); otherwise posts the
 * "no caps before the first buffer" NEGOTIATION error and returns FALSE (the caller
 * returns GST_FLOW_NOT_NEGOTIATED). */
gboolean gst_cony_element_check_caps_seen (GstElement *element, gboolean have_caps);

/* Maps @buf for reading and checks that it holds whole units of @unit bytes
 * (described by @unit_name, e.g. "64-float tokens"). On failure posts the error
 * (could not map / STREAM FORMAT naming the sizes, with @text as its message or
 * GStreamer's when NULL), leaves @buf unmapped and returns FALSE (the caller returns
 * GST_FLOW_ERROR). */
gboolean gst_cony_element_map_units (GstElement *element, GstBuffer *buf, GstMapInfo *map,
    gsize unit, const gchar *unit_name, const gchar *text);

/* Negotiation failures that name the cause (#46.5). refused_caps: what upstream offers
 * when the answer to @query (a sink pad's CAPS or ACCEPT_CAPS query, already answered)
 * refuses it: the filter of a CAPS query answered empty, the caps of an ACCEPT_CAPS
 * query answered FALSE; NULL otherwise. refuse_caps: posts the CORE/NEGOTIATION error
 * "ELEMENT takes @takes, got @got: @hint" (debug: @offered, may be NULL), once until
 * *@posted is cleared, since upstream asks again and again. */
const GstCaps *gst_cony_element_refused_caps (GstQuery *query);
void gst_cony_element_refuse_caps (GstElement *element, gboolean *posted, const gchar *takes,
    const gchar *got, const gchar *hint, const GstCaps *offered);
/* refuse_caps with the hint naming the missing converters: "add A and B before it", "add A
 * before it", "add B before it", or "add B ! A before it" when neither is known missing. */
void gst_cony_element_refuse_convertible (GstElement *element, gboolean *posted, const gchar *takes,
    const gchar *got, const GstCaps *offered, gboolean need_a, const gchar *a, gboolean need_b,
    const gchar *b);
/* refuse_caps for token caps that gst_cony_tokens_info_from_caps() could not read (@why):
 * "ELEMENT takes D-float tokens (other/tensors, float32, dimensions=D:K), got ...". */
void gst_cony_element_refuse_tokens (GstElement *element, gboolean *posted, guint dim,
    const GstCaps *caps, const gchar *why);
/* For a token sink's query handler, after answering @query: names a refusal it shows
 * (gst_cony_element_refused_caps()) with gst_cony_element_refuse_tokens(). */
void gst_cony_element_name_token_refusal (GstElement *element, gboolean *posted, guint dim,
    GstQuery *query);
/* A field of @s as users read it ("44100", "I420"), NULL when absent or not fixed. */
gchar *gst_cony_element_fixed_field (const GstStructure *s, const gchar *field);

/* Called by each element's stop, after freeing its libcony objects: hands the freed
 * heap back to the OS (glibc's malloc_trim). Without it, pipelines created and destroyed
 * in one process grew the resident memory round after round (#46.7): what streaming
 * threads free stays in glibc's per-thread arenas, which only shrink from their top. */
void gst_cony_element_trim_heap (void);

/* Pushes @caps (transfer full, may be NULL: a failure) as a CAPS event on @srcpad. */
gboolean gst_cony_element_push_caps (GstPad *srcpad, GstCaps *caps);

/* Answers a CAPS query with @caps (transfer full) intersected with the query's filter. */
gboolean gst_cony_element_answer_caps (GstQuery *query, GstCaps *caps);

/* Stamps an output buffer of @n tokens: PTS, no DTS, DURATION, OFFSET = @offset and
 * OFFSET_END = @offset + @n; DISCONT when *@discont, which is then cleared. */
void gst_cony_element_stamp (GstBuffer *out, GstClockTime pts, GstClockTime duration,
    guint64 offset, guint64 n, gboolean *discont);

/* Warn-once for runs of bad buffers: TRUE when @bad starts a run (the caller posts its
 * warning); *@in_run follows @bad, so the next good buffer ends the run. */
gboolean gst_cony_element_run_starts (gboolean *in_run, gboolean bad);

G_END_DECLS
