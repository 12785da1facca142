/* Internals of conytransformer shared by gstconytransformer.c (the element: model,
 * caps, steps, the meta) and gstconytransformer-messages.c (segments, bus messages, what
 * EOS closes). Not installed. */
#pragma once
#include "gstconytransformer.h"

G_BEGIN_DECLS

/* The name of the element's bus messages (like level's and spectrum's). */
#define MESSAGE_NAME "conytransformer"

/* The @k best classes into self->top_ids / top_labels, best first; returns how many. */
guint gst_cony_transformer_select_top (GstConyTransformer *self, guint k);

/* @t (buffer time) as running time (@running) or stream time in the current segment;
 * NONE when it has none. */
GstClockTime gst_cony_transformer_segment_time (GstConyTransformer *self, GstClockTime t,
    gboolean running);

/* The one result builder: step @st's result naming class @cls (the top class, or a
 * segment event's label) with its @n_top best classes and @n_events events, into @r,
 * which borrows the element's arrays (valid until the next step). The meta is @r; the
 * custom meta, the bus messages and conyjson format it through gstconyresult.h. */
void gst_cony_transformer_fill_result (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint cls, guint n_top, guint n_events, GstConyClassificationMeta *r);

/* Advances the label segments by step @st (top class @top); returns the events it
 * wrote to self->events. A gated step (st->gated) counts as one where no class reaches
 * its threshold. */
guint gst_cony_transformer_update_segments (GstConyTransformer *self,
    const GstConyTransformerStep *st, gint top, gdouble threshold, const GstConySegmentRule *hold);

/* Appends step @st's bus messages for @mode to *@messages (made when needed). */
void gst_cony_transformer_step_messages (GstConyTransformer *self, const GstConyTransformerStep *st,
    gint top, guint n_top, guint n_events, GstConyTransformerMessageMode mode, gdouble threshold,
    GPtrArray **messages);

/* EOS: the open segments' offsets downstream in a custom event (every mode), then, in
 * on-change mode, the messages that close them. */
void gst_cony_transformer_push_closed_segments (GstConyTransformer *self);
void gst_cony_transformer_close_segments_at_eos (GstConyTransformer *self);

G_END_DECLS
