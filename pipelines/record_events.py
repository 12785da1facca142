#!/usr/bin/python3
"""Event clips: one file of the original audio (and video) per segment of the chosen
labels, with PRE_ROLL seconds before it, named by label and time; one JSON line per segment
event, naming its file.

    pipelines/record_events.py SOURCE --out DIR [--labels 'bark;siren'] [--pre-roll 5]
        [--post-roll 1] [--groups-file FILE] [--threshold 0.3] [--min-steps 2]
        [--min-level DB] [--transformer M] [--vggish CNN]

SOURCE: a media file or URI, or a GStreamer source description (`pipelines/
print_results.py`'s forms: `mic`, "autoaudiosrc", ...). The audio goes through a `tee`:
one branch is classified (conymel preset=yamnet ! conyvggish YAMNet ! conytransformer with
the AudioSet tagger, `groups-file` = models/audioset/home.groups and `listen` = the chosen
labels, by default every group of the file; docs/elements.md, "Listen lists and label
groups"); the other keeps the original audio in a queue and, in a pad probe, lets through
exactly the buffers that fall in a clip, [segment start - PRE_ROLL, segment end +
POST_ROLL) in running time, into `splitmuxsink` (matroskamux, raw S16LE audio):
`split-after` starts a new file at each clip and `format-location-full` names it
`LABEL-SECONDS.mka` (the segment's start in running time). A file with a video stream
(asked of GStreamer's discoverer) gets its video too, VP8 in `LABEL-SECONDS.mkv`: the video
frames go through the same decision, the encoder is asked for a key frame at each clip's
first frame, and the video, splitmuxsink's reference stream, is where files are cut. A buffer is decided once the
classifier has reached PRE_ROLL + the onset hold past it, so nothing is cut early; live,
that is how long the queue holds audio. Segments whose clips overlap share one file (named
by the first). Each onset and offset of a chosen label is printed as the result record of
its step (docs/results.schema.json) whose events carry `file`; the segments EOS closes come
in an "eos" record. Files are finished when the next clip starts or the stream ends.

Needs python3-gi and the plugin on GST_PLUGIN_PATH (set to build/gst when unset)."""

import argparse
import json
import os
import sys
import threading

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from has_audio import CannotTell, stream_kinds  # noqa: E402
from print_results import records_from_buffer, source_description  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = Gst.SECOND // 4  # the tagger's step
INF = 1 << 63


class Clips:
    """The clips, from the classifier's segment events (its streaming thread), and the
    decision for each recorded buffer (the recorder's streaming thread, which waits until
    the classifier has heard far enough)."""

    def __init__(self, out, pre, post, hold, ext):
        self.out, self.pre, self.post, self.hold, self.ext = out, pre, post, hold, ext
        self.cond = threading.Condition()
        self.heard = 0          # running time of the classifier's newest step
        self.clips = []         # {"file", "t0", "t1" (None while open), "open"}
        self.label_clip = {}    # open label -> its clip
        self.current = None     # the clip splitmuxsink is writing
        self.next_name = None

    def file_for(self, label, start):
        """The file of a segment of @label starting at @start (its onset)."""
        last = self.clips[-1] if self.clips else None
        if last and (last["t1"] is None or last["t1"] > start - self.pre):
            clip = last                       # overlaps the clip before: the same file
            clip["t1"] = None
        else:
            t0 = max(start - self.pre, last["t1"] if last else 0, 0)
            name = f"{label.replace('/', '_')}-{start / Gst.SECOND:09.3f}.{self.ext}"
            clip = {"file": os.path.join(self.out, name), "t0": t0, "t1": None, "open": 0,
                    "end": 0}
            self.clips.append(clip)
        clip["open"] += 1
        self.label_clip[label] = clip
        return clip["file"]

    def close(self, label, end):
        clip = self.label_clip.pop(label, None)
        if clip is None:
            return None
        clip["open"] -= 1
        clip["end"] = max(clip["end"], end)
        if clip["open"] == 0:
            clip["t1"] = clip["end"] + self.post
        return clip["file"]

    def note_events(self, events, chosen):
        """Opens and closes clips for @events (in place: each chosen one gets "file")."""
        with self.cond:
            for e in events:
                if e["label"] not in chosen:
                    continue
                if e["event"] == "onset":
                    e["file"] = self.file_for(e["label"], e["segment_start"])
                else:
                    e["file"] = self.close(e["label"], e["segment_end"])
            self.cond.notify_all()

    def hear(self, t):
        with self.cond:
            self.heard = max(self.heard, t)
            self.cond.notify_all()

    def decide(self, r0, r1):
        """The clip of a buffer over [r0, r1) of running time, or None; waits until no
        onset that could reach it (its pre-roll included) can still come."""
        with self.cond:
            self.cond.wait_for(lambda: self.heard >= r1 + self.pre + self.hold)
            for clip in self.clips:
                if clip["t0"] <= r0 and (clip["t1"] is None or r0 < clip["t1"]):
                    return clip
            return None


def on_classified(pad, info, clips, chosen, source, printer, done):
    """The classifier's results and its EOS (segments still open)."""
    if info.type & Gst.PadProbeType.BUFFER:
        for rec in records_from_buffer(info.get_buffer(), source):
            clips.hear(running_time(pad, rec["pts"]))
            events = rec.get("events", [])
            clips.note_events(events, chosen)
            if any("file" in e for e in events):
                rec["events"] = [e for e in events if e["label"] in chosen]
                rec.pop("scores", None)
                printer(rec)
        return Gst.PadProbeReturn.OK
    event = info.get_event()
    s = event.get_structure()
    if event.type == Gst.EventType.CUSTOM_DOWNSTREAM and s.has_name("GstConySegmentsClosed"):
        ok, arr = s.get_array("events")
        events = []
        for i in range(arr.n_values if ok else 0):
            e = arr.get_nth(i)
            events.append({"event": "offset", "class_id": e.get_value("class_id"),
                           "label": e.get_string("label"),
                           "segment_start": int(e.get_value("segment_start")),
                           "segment_end": int(e.get_value("segment_end"))})
        clips.note_events(events, chosen)
        events = [e for e in events if "file" in e]
        if events:
            rec = {"type": "eos", "step": int(s.get_value("step")), "events": events}
            printer(rec if source is None else {"type": "eos", "source": source} | rec)
    elif event.type == Gst.EventType.EOS:
        clips.hear(INF)
        done.classifier_eos()
    return Gst.PadProbeReturn.OK


def running_time(pad, pts):
    """@pts (buffer time) as running time in @pad's segment; 0 when unknown."""
    seg = pad.get_sticky_event(Gst.EventType.SEGMENT, 0)
    if seg is None or pts is None or pts == Gst.CLOCK_TIME_NONE:
        return 0
    t = seg.parse_segment().to_running_time(Gst.Format.TIME, pts)
    return 0 if t == Gst.CLOCK_TIME_NONE else t


def on_recorded(pad, info, clips, sink, done, reference, is_video):
    """A recording branch: only the buffers of a clip pass. The reference branch (the video
    when there is one, else the audio) starts a new file at each clip; a video branch
    asks its encoder for a key frame there, where splitmuxsink can cut."""
    if info.type & Gst.PadProbeType.EVENT_DOWNSTREAM:
        if info.get_event().type == Gst.EventType.EOS:
            done.recorder_eos(reference, clips.current is not None)
        return Gst.PadProbeReturn.OK
    buf = info.get_buffer()
    if buf.pts == Gst.CLOCK_TIME_NONE:
        return Gst.PadProbeReturn.DROP
    r0 = running_time(pad, buf.pts)
    dur = buf.duration if buf.duration != Gst.CLOCK_TIME_NONE else 0
    clip = clips.decide(r0, r0 + dur)
    if is_video and clip is not None and clip is not clips.current:  # (before it changes)
        pad.push_event(GstVideo.video_event_new_downstream_force_key_unit(
            buf.pts, Gst.CLOCK_TIME_NONE, r0, True, 0))
    if clip is None:
        return Gst.PadProbeReturn.DROP
    if reference and clip is not clips.current:
        if clips.current is not None:
            sink.emit("split-after")  # the file before ends with all of its clip
        clips.current = clip
        clips.next_name = clip["file"]
    return Gst.PadProbeReturn.OK


class Done:
    """The end: the pipeline never posts EOS (the clips' sink keeps a state of its own), so
    it ends once the classifier has passed EOS and the recorder's EOS has closed the last
    file (or there was none)."""

    def __init__(self, loop, branches):
        self.loop, self.classifier, self.recorder, self.closing = loop, False, False, False
        self.branches = branches  # recording branches still to see EOS

    def check(self):
        if self.classifier and self.recorder and not self.closing:
            self.loop.quit()

    def classifier_eos(self):
        self.classifier = True
        GLib.idle_add(self.check)

    def recorder_eos(self, reference, file_open):
        self.branches -= 1
        if reference:
            self.closing = file_open
        self.recorder = self.branches == 0
        GLib.idle_add(self.check)

    def message(self, msg):
        s = msg.get_structure()
        if s is not None and s.get_name() == "splitmuxsink-fragment-closed" and self.recorder:
            self.closing = False
        self.check()


def has_video(source):
    """Whether @source (a file or URI) has a video stream to record; FALSE for devices
    and source descriptions, and when the discoverer cannot tell."""
    if not (Gst.uri_is_valid(source) or os.path.exists(source)):
        return False
    try:
        return "video" in stream_kinds(source, 10)
    except CannotTell:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("--out", required=True, help="folder of the clips (made if missing)")
    ap.add_argument("--labels", help="';'-separated labels to record (default: every group)")
    ap.add_argument("--pre-roll", type=float, default=5.0, help="seconds before a segment")
    ap.add_argument("--post-roll", type=float, default=1.0,
                    help="seconds after a segment's last step (default 1: its CNN window)")
    ap.add_argument("--groups-file", default=os.path.join(ROOT, "models", "audioset",
                                                          "home.groups"))
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--min-steps", type=int, default=2)
    ap.add_argument("--min-level", type=float, help="the level gate (dBFS; default off)")
    ap.add_argument("--transformer", default=os.path.join(ROOT, "models", "audioset",
                                                          "tagger.safetensors"))
    ap.add_argument("--vggish", default=os.path.join(ROOT, "models", "yamnet",
                                                     "yamnet.safetensors"))
    args = ap.parse_args()
    if os.path.isdir(os.path.join(ROOT, "build", "gst")):
        os.environ.setdefault("GST_PLUGIN_PATH", os.path.join(ROOT, "build", "gst"))
    Gst.init(None)
    os.makedirs(args.out, exist_ok=True)
    if args.labels:
        chosen = [x.strip() for x in args.labels.split(";") if x.strip()]
    else:
        chosen = [line.split("#", 1)[0].split("=", 1)[0].strip()
                  for line in open(args.groups_file, encoding="utf-8")
                  if "=" in line.split("#", 1)[0]]
    gate = "" if args.min_level is None else f" min-level={args.min_level}"
    src = source_description(args.source, "record_events.py")
    video = has_video(args.source)
    if video:  # the file's video too, VP8 (key frames where clips start)
        src = src.replace("uridecodebin ", "uridecodebin name=d ", 1) + (
            " d. ! queue ! videoconvert ! queue name=vhold max-size-time=0 max-size-bytes=0 "
            "max-size-buffers=0 ! vp8enc deadline=1 keyframe-max-dist=300 ! clips.video "
            "d.")
    desc = (f"{src} ! audioconvert ! audioresample ! tee name=t "
            f"t. ! queue ! audioconvert ! audioresample ! conymel preset=yamnet "
            f"! conyvggish model=\"{args.vggish}\" output=embedding{gate} "
            f"! conytransformer name=classifier model=\"{args.transformer}\" "
            f"groups-file=\"{args.groups_file}\" listen=\"{';'.join(chosen)}\" other-label=\"\" "
            f"threshold={args.threshold} min-steps={args.min_steps} post-messages=false "
            f"! fakesink sync=false async=false "
            f"t. ! queue name=hold max-size-time=0 max-size-bytes=0 max-size-buffers=0 "
            f"! audioconvert ! audio/x-raw,format=S16LE ! clips.audio_%u "
            f"splitmuxsink name=clips muxer-factory=matroskamux")
    try:
        pipeline = Gst.parse_launch(desc)
    except GLib.Error as e:
        sys.exit(f"record_events.py: {e.message}")
    clips = Clips(args.out, int(args.pre_roll * Gst.SECOND), int(args.post_roll * Gst.SECOND),
                  (args.min_steps + 1) * STEP, "mkv" if video else "mka")
    sink = pipeline.get_by_name("clips")
    sink.connect("format-location-full", lambda _s, _i, _sample: clips.next_name)
    # no preroll on the clips (their first buffer may be minutes, or never, away): the
    # sink's state is its own, PLAYING from the start, NULL after the pipeline's EOS
    sink.set_locked_state(True)

    def printer(rec):
        print(json.dumps(rec), flush=True)

    loop = GLib.MainLoop()
    done = Done(loop, 2 if video else 1)
    pipeline.get_by_name("classifier").get_static_pad("src").add_probe(
        Gst.PadProbeType.BUFFER | Gst.PadProbeType.EVENT_DOWNSTREAM, on_classified, clips,
        chosen, None, printer, done)
    probe = Gst.PadProbeType.BUFFER | Gst.PadProbeType.EVENT_DOWNSTREAM
    if video:
        pipeline.get_by_name("vhold").get_static_pad("src").add_probe(
            probe, on_recorded, clips, sink, done, True, True)
    pipeline.get_by_name("hold").get_static_pad("src").add_probe(
        probe, on_recorded, clips, sink, done, not video, False)
    status = [0]

    def on_message(_bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"record_events.py: {err.message} ({dbg})", file=sys.stderr)
            status[0] = 1
            clips.hear(INF)
            loop.quit()
        else:
            done.message(msg)

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    sink.set_state(Gst.State.PLAYING)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        loop.run()
    except KeyboardInterrupt:
        pipeline.send_event(Gst.Event.new_eos())
        bus.timed_pop_filtered(10 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    sink.set_state(Gst.State.NULL)
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
