/* Segments of a label track with a minimum hold (not a public API): the state a
 * track reports changes only once a new state has held for min-steps steps and
 * min-duration of time; shorter runs are flicker and belong to the segment around them. */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

/* How long a new state must hold before it is reported: both must be met. */
typedef struct {
  guint min_steps;           /* >= 1 */
  GstClockTime min_duration; /* 0: no time condition */
  gdouble hysteresis;        /* sigmoid labels: on stays on down to threshold - this */
} GstConySegmentRule;

typedef struct {
  gint value; /* the state: a class id (softmax), 1/0 (one sigmoid label); -1 none */
  GstClockTime start, end;
} GstConySegment;

/* One track: its reported segment, and a run of another state not held long enough yet. */
typedef struct {
  GstConySegment seg;
  gint pending; /* -1: none */
  GstClockTime pending_start, pending_end;
  guint pending_steps;
} GstConySegmentTrack;

/* Starts a track in state @value (-1: none yet) with no times. */
void gst_cony_segment_track_reset (GstConySegmentTrack *track, gint value);

/* One step in state @value over [@start, @end) (running time; NONE when not known).
 * TRUE when the reported state changes at this step: *@ended is the segment that ends
 * (value -1 when there was none) and track->seg the new one, which starts at the first
 * step of the run that completed the hold. A run that gives way before holding long
 * enough is absorbed into the reported segment. */
gboolean gst_cony_segment_track_step (GstConySegmentTrack *track, gint value, GstClockTime start,
    GstClockTime end, const GstConySegmentRule *rule, GstConySegment *ended);

/* At the end of the stream: a pending run that never held is absorbed; returns the
 * reported segment. */
const GstConySegment *gst_cony_segment_track_close (GstConySegmentTrack *track);

G_END_DECLS
