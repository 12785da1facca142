#!/usr/bin/python3
"""Classifies audio with conymel ! conyvggish ! conytransformer and prints one line per step.

    pipelines/print_results.py [SOURCE] [--json] [--from-meta] [options]

SOURCE is a media file path or URI (decoded with uridecodebin), `mic` (autoaudiosrc)
or `test` (a 5 s audiotestsrc tone; the default). Results come from the element's
`conytransformer` bus messages, or with --from-meta from the
GstConyClassificationCustomMeta on each buffer (read in a pad probe through GObject
introspection: what an application that handles the buffers itself would do).

Needs python3-gi and gir1.2-gstreamer-1.0 (Debian), and the plugin on GST_PLUGIN_PATH
(the scripts in pipelines/ set it to build/gst when it is not set).
Models: --vggish / --transformer, or $CONY_VGGISH / $CONY_TRANSFORMER, default
models/audio/vggish.safetensors and models/audio/transformer.safetensors.
"""

import argparse
import json
import os
import signal
import sys
import warnings

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUSTOM_META = "GstConyClassificationCustomMeta"


def float_array(structure, field):
    """A GST_TYPE_ARRAY of floats as a Python list (works without gst-python's overrides)."""
    ok, arr = structure.get_array(field)
    if not ok:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [arr.get_nth(i) for i in range(arr.n_values)]


def ns(value):
    """Clock times as nanoseconds; GST_CLOCK_TIME_NONE as None."""
    return None if value is None or value == Gst.CLOCK_TIME_NONE else int(value)


def seconds(value):
    return "-" if value is None else f"{value / Gst.SECOND:.2f}"


def source_description(source):
    if source == "test":
        return "audiotestsrc num-buffers=80 samplesperbuffer=1000 wave=sine freq=440"
    if source == "mic":
        return "autoaudiosrc"
    uri = source if Gst.uri_is_valid(source) else Gst.filename_to_uri(os.path.abspath(source))
    return f'uridecodebin uri="{uri}"'


class Printer:
    def __init__(self, as_json):
        self.as_json = as_json

    def emit(self, record):
        if self.as_json:
            print(json.dumps(record), flush=True)
        else:
            extra = ""
            if "segment_start" in record:
                extra = f"  (since {seconds(record['segment_start'])} s)"
            print(f"{seconds(record['time']):>8} s  {record['label']:<20} "
                  f"{record['confidence']:.3f}{extra}", flush=True)


def record_from_message(s):
    """time: the end of the input the result covers, in stream time (the printed column:
    how far into the stream the result has heard); start + duration: the whole span
    (buffer time), pts: the step's own."""
    rec = {
        "source": "message",
        "time": ns(s.get_value("stream-time-end")),
        "start": ns(s.get_value("timestamp")),
        "pts": ns(s.get_value("pts")),
        "running_time": ns(s.get_value("running-time")),
        "duration": ns(s.get_value("duration")),
        "step": int(s.get_value("step")),
        "class_id": s.get_value("class-id"),
        "label": s.get_string("label"),
        "confidence": round(float(s.get_value("confidence")), 6),
        "scores": [round(x, 6) for x in float_array(s, "scores")],
        "top": list(zip(float_array(s, "top-labels"),   # (any GST_TYPE_ARRAY)
                        [round(x, 6) for x in float_array(s, "top-scores")])),
    }
    if s.has_field("event"):
        rec["event"] = s.get_string("event")
    if s.has_field("segment-start"):
        rec["segment_start"] = ns(s.get_value("segment-start"))
        rec["previous_label"] = s.get_string("previous-label")
        rec["previous_segment_start"] = ns(s.get_value("previous-segment-start"))
        rec["previous_segment_end"] = ns(s.get_value("previous-segment-end"))
    if s.has_field("eos"):
        rec["eos"] = bool(s.get_value("eos"))
    return rec


def records_from_buffer(buf):
    """The classification on a buffer, from the custom meta mirror. get_custom_meta()
    returns one meta; after conyvggish every buffer holds one token, hence one step."""
    meta = buf.get_custom_meta(CUSTOM_META)
    if meta is None:
        return []
    s = meta.get_structure()
    return [{
        "source": "meta",
        "time": ns(s.get_value("stream-end")),
        "pts": ns(s.get_value("pts")),
        "window_start": ns(s.get_value("window-start")),
        "window_end": ns(s.get_value("window-end")),
        "step": int(s.get_value("step")),
        "class_id": s.get_value("class-id"),
        "label": s.get_string("label"),
        "confidence": round(float(s.get_value("score")), 6),
        "context_fill": s.get_value("context-fill"),
        "scores": [round(x, 6) for x in float_array(s, "scores")],
    }]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default="test",
                    help="media file or URI, 'mic' or 'test' (default)")
    ap.add_argument("--vggish", default=os.environ.get(
        "CONY_VGGISH", os.path.join(ROOT, "models", "audio", "vggish.safetensors")))
    ap.add_argument("--transformer", default=os.environ.get(
        "CONY_TRANSFORMER", os.path.join(ROOT, "models", "audio", "transformer.safetensors")))
    ap.add_argument("--labels-file", help="one label per line (default: the model's labels)")
    ap.add_argument("--attention", help="override the model's attention variant")
    ap.add_argument("--message-mode", choices=["every-step", "on-change"], default="every-step")
    ap.add_argument("--threshold", type=float, default=0.0)
    ap.add_argument("--json", action="store_true", help="print JSON lines")
    ap.add_argument("--from-meta", action="store_true",
                    help="read the results from the buffers' custom meta instead of the bus")
    args = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # quiet when piped into head

    if "GST_PLUGIN_PATH" not in os.environ and os.path.isdir(os.path.join(ROOT, "build", "gst")):
        os.environ["GST_PLUGIN_PATH"] = os.path.join(ROOT, "build", "gst")
    Gst.init(None)
    for path in (args.vggish, args.transformer):
        if not os.path.exists(path):
            sys.exit(f"print_results.py: model file {path} not found "
                     "(see --vggish / --transformer)")
    props = f'model="{args.transformer}" message-mode={args.message_mode} threshold={args.threshold}'
    if args.labels_file:
        props += f' labels-file="{args.labels_file}"'
    if args.attention:
        props += f" attention={args.attention}"
    if args.from_meta:
        props += " post-messages=false"
    live = args.source == "mic"
    desc = (f"{source_description(args.source)} ! audioconvert ! audioresample ! conymel "
            f'! conyvggish model="{args.vggish}" ! conytransformer name=classifier {props} '
            f"! fakesink sync={'true' if live else 'false'}")
    try:
        pipeline = Gst.parse_launch(desc)
    except GLib.Error as e:
        sys.exit(f"print_results.py: {e.message}")

    printer = Printer(args.json)
    if args.from_meta:
        def probe(pad, info):
            for rec in records_from_buffer(info.get_buffer()):
                printer.emit(rec)
            return Gst.PadProbeReturn.OK
        pad = pipeline.get_by_name("classifier").get_static_pad("src")
        pad.add_probe(Gst.PadProbeType.BUFFER, probe)

    loop = GLib.MainLoop()
    status = {"rc": 0}

    def on_message(bus, msg):
        t = msg.type
        if t == Gst.MessageType.ELEMENT:
            s = msg.get_structure()
            if s is not None and s.get_name() == "conytransformer":
                printer.emit(record_from_message(s))
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"print_results.py: error from {msg.src.get_name()}: {err.message}\n{dbg}",
                  file=sys.stderr)
            status["rc"] = 1
            loop.quit()
        elif t == Gst.MessageType.WARNING:
            err, dbg = msg.parse_warning()
            print(f"print_results.py: warning from {msg.src.get_name()}: {err.message}",
                  file=sys.stderr)
        elif t == Gst.MessageType.EOS:
            loop.quit()

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        # the error message on the bus says why
        msg = bus.timed_pop_filtered(Gst.SECOND, Gst.MessageType.ERROR)
        if msg:
            err, dbg = msg.parse_error()
            print(f"print_results.py: {err.message}\n{dbg}", file=sys.stderr)
        pipeline.set_state(Gst.State.NULL)
        sys.exit(1)
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    pipeline.set_state(Gst.State.NULL)
    bus.remove_signal_watch()
    sys.exit(status["rc"])


if __name__ == "__main__":
    main()
