/* The model plumbing of the two CNN elements, conyvggish and conyframeembed (not a
 * public API): their shared properties (model, output, model-users and, where the
 * element offers it, precision and precision-in-use), loading the CNN with those
 * settings on READY->PAUSED, and the token source that the output caps name. */
#pragma once
#include "cony/cnn.h"
#include "cony/model.h"
#include "gstconytokens.h"

#include <gst/gst.h>

G_BEGIN_DECLS

/**
 * GstConyVggishOutput:
 * @GST_CONY_VGGISH_OUTPUT_SCORES: the network's last layer (VGGish: its
 *   128-d embedding; YAMNet: 521 sigmoid scores)
 * @GST_CONY_VGGISH_OUTPUT_EMBEDDING: the global average pool that feeds the
 *   FC head (YAMNet: 1024-d); only for networks that have one
 *
 * What conyvggish outputs per window.
 */
typedef enum
{
  GST_CONY_VGGISH_OUTPUT_SCORES = CONY_CNN_OUTPUT_SCORES,
  GST_CONY_VGGISH_OUTPUT_EMBEDDING = CONY_CNN_OUTPUT_EMBEDDING,
} GstConyVggishOutput;

#define GST_TYPE_CONY_VGGISH_OUTPUT (gst_cony_vggish_output_get_type ())
GType gst_cony_vggish_output_get_type (void);

/**
 * GstConyVggishPrecision:
 * @GST_CONY_VGGISH_PRECISION_AUTO: the model file decides: int8 inference for
 *   files that carry int8 activation quantisation (YAMNet), float otherwise
 * @GST_CONY_VGGISH_PRECISION_FLOAT: the float engine, whatever the file
 * @GST_CONY_VGGISH_PRECISION_INT8: int8 inference; fails to start on a file
 *   without activation quantisation
 *
 * Which arithmetic conyvggish and conyframeembed run (see cony_cnn_set_precision()).
 */
typedef enum
{
  GST_CONY_VGGISH_PRECISION_AUTO = CONY_CNN_PRECISION_AUTO,
  GST_CONY_VGGISH_PRECISION_FLOAT = CONY_CNN_PRECISION_FLOAT,
  GST_CONY_VGGISH_PRECISION_INT8 = CONY_CNN_PRECISION_INT8,
} GstConyVggishPrecision;

#define GST_TYPE_CONY_VGGISH_PRECISION (gst_cony_vggish_precision_get_type ())
GType gst_cony_vggish_precision_get_type (void);

/* The shared properties' ids, as offsets from the element's first id for them (its
 * enum reserves GST_CONY_CNN_N_PROPS ids from there). */
typedef enum
{
  GST_CONY_CNN_PROP_MODEL,
  GST_CONY_CNN_PROP_OUTPUT,
  GST_CONY_CNN_PROP_MODEL_USERS,
  GST_CONY_CNN_PROP_PRECISION,
  GST_CONY_CNN_PROP_PRECISION_IN_USE,
  GST_CONY_CNN_N_PROPS,
} GstConyCnnProp;

/* What the element says in its shared properties' blurbs and errors. */
typedef struct {
  const gchar *model_blurb;  /* the model property's blurb */
  const gchar *model_hint;   /* "No model file given: set model=@model_hint" */
  const gchar *output_blurb; /* the output property's blurb */
  gboolean precision;        /* offers precision and precision-in-use */
} GstConyCnnElementInfo;

typedef struct {
  guint first_prop;
  const GstConyCnnElementInfo *info;
  /* Properties (object lock), read on READY->PAUSED. */
  gchar *model;
  GstConyVggishOutput output;
  GstConyVggishPrecision precision;
  /* Stream state: the loaded CNN (its pointer changes under the object lock, where
   * model-users reads it), the file for the token caps, the output in use. */
  ConyCnn *cnn;
  ConyCnnRef source;
  GstConyVggishOutput output_in_use;
} GstConyCnnElement;

/* class_init: installs the shared properties at ids @first_prop + GstConyCnnProp
 * (precision ones only with @info->precision; @info must outlive the class). */
void gst_cony_cnn_element_install_properties (GObjectClass *klass, guint first_prop,
    const GstConyCnnElementInfo *info);
/* instance init: the defaults (no model, output=scores, precision=auto). */
void gst_cony_cnn_element_init (GstConyCnnElement *net, guint first_prop,
    const GstConyCnnElementInfo *info);
/* set_property / get_property, without the object lock (they take it): TRUE when
 * @prop_id is one of the shared properties (then handled), FALSE otherwise. The
 * element checks gst_cony_element_property_settable() before. */
gboolean gst_cony_cnn_element_set_property (GstElement *element, GstConyCnnElement *net,
    guint prop_id, const GValue *value);
gboolean gst_cony_cnn_element_get_property (GstElement *element, GstConyCnnElement *net,
    guint prop_id, GValue *value);

/* start: finds the model file (gst_cony_element_find_model()), loads it (shared with
 * other loads of the file), sets its precision (where offered) and output, reads its
 * token source. Call without the object lock. TRUE with *@path the file found
 * (g_free() it); otherwise posts the error naming what was wrong and returns FALSE
 * with *@path NULL or the file that failed. */
gboolean gst_cony_cnn_element_open (GstElement *element, GstConyCnnElement *net, gchar **path);
/* stop: frees the CNN and the token source. */
void gst_cony_cnn_element_close (GstElement *element, GstConyCnnElement *net);
/* finalize: close and free the properties. */
void gst_cony_cnn_element_finalize (GstElement *element, GstConyCnnElement *net);

G_END_DECLS
