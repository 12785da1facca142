/* Label segments with a minimum hold (see gstconysegments.h). */
#include "gstconysegments.h"

void
gst_cony_segment_track_reset (GstConySegmentTrack *track, gint value)
{
  track->seg = (GstConySegment){ value, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE };
  track->pending = -1;
  track->pending_start = track->pending_end = GST_CLOCK_TIME_NONE;
  track->pending_steps = 0;
}

/* Whether the pending run has held for @rule: steps always; time when known (a run
 * without timestamps cannot prove a duration, so it never holds one). */
static gboolean
held (const GstConySegmentTrack *track, const GstConySegmentRule *rule)
{
  if (track->pending_steps < rule->min_steps)
    return FALSE;
  if (rule->min_duration == 0)
    return TRUE;
  return GST_CLOCK_TIME_IS_VALID (track->pending_start)
      && GST_CLOCK_TIME_IS_VALID (track->pending_end) && track->pending_end >= track->pending_start
      && track->pending_end - track->pending_start >= rule->min_duration;
}

/* The pending run gave way before it held: its steps are the reported segment's. */
static void
absorb_pending (GstConySegmentTrack *track)
{
  if (track->pending >= 0 && GST_CLOCK_TIME_IS_VALID (track->pending_end))
    track->seg.end = track->pending_end;
  track->pending = -1;
  track->pending_steps = 0;
}

gboolean
gst_cony_segment_track_step (GstConySegmentTrack *track, gint value, GstClockTime start,
    GstClockTime end, const GstConySegmentRule *rule, GstConySegment *ended)
{
  if (value == track->seg.value) {
    absorb_pending (track);
    track->seg.end = end;
    return FALSE;
  }
  if (value != track->pending) {
    absorb_pending (track);
    track->pending = value;
    track->pending_start = start;
  }
  track->pending_end = end;
  track->pending_steps++;
  if (!held (track, rule))
    return FALSE;
  *ended = track->seg;
  track->seg = (GstConySegment){ value, track->pending_start, end };
  track->pending = -1;
  track->pending_steps = 0;
  return TRUE;
}

const GstConySegment *
gst_cony_segment_track_close (GstConySegmentTrack *track)
{
  absorb_pending (track);
  return &track->seg;
}
