#!/usr/bin/python3
"""Classifies audio with conymel ! conyvggish ! conytransformer and prints one line per step.

    pipelines/print_results.py [SOURCE] [--json] [--from-meta] [options]

SOURCE is a media file path or URI (decoded with uridecodebin; one without an audio
stream: one line and status 4, from pipelines/has_audio.py), `mic` (the default
microphone of GStreamer's device monitor; none: an error and status 3, not a fake source), `test`
(a 5 s audiotestsrc tone; the default) or any GStreamer source description, e.g.
"audiotestsrc is-live=true". Each result is printed (and flushed) as soon as the
element posts it; when the reader goes away (`| head -1`) the script stops quietly
with status 0. Results come from the element's
`conytransformer` bus messages, or with --from-meta from the
GstConyClassificationCustomMeta on each buffer (read in a pad probe through GObject
introspection: what an application that handles the buffers itself would do).

Needs python3-gi and gir1.2-gstreamer-1.0 (Debian), and the plugin on GST_PLUGIN_PATH
(the scripts in pipelines/ set it to build/gst when it is not set).
Models: --vggish / --transformer, or $CONY_VGGISH / $CONY_TRANSFORMER, default
models/audio/transformer.safetensors and the CNN its config names (frontend.cnn, found in
models/*/: models/audio/yamnet-adapted.safetensors for it), as pipelines/lib.sh; conymel and
conyvggish get the settings the classifier's config records (token_props: YAMNet's
preset and pooled embedding for a classifier trained on them).
"""

import argparse
import json
import os
import subprocess
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


def source_description(source, prog="print_results.py"):
    """gst-launch text of the source: `test`, `mic` (the device monitor's default
    microphone; none: SystemExit), a file path or URI, or any other text is taken as a
    GStreamer source description (e.g. "audiotestsrc is-live=true")."""
    if source == "test":
        return "audiotestsrc num-buffers=80 samplesperbuffer=1000 wave=sine freq=440"
    if source == "mic":
        import devices  # pipelines/devices.py; none: exit 3 (devices.NO_DEVICE)
        return devices.require("audio", prog,
                               "give a file or a GStreamer source description")
    if Gst.uri_is_valid(source):
        require_audio(source, prog)
        return f'uridecodebin uri="{source}"'
    if os.path.exists(source) or not any(c in source for c in " =!"):
        require_audio(source, prog)
        return f'uridecodebin uri="{Gst.filename_to_uri(os.path.abspath(source))}"'
    return source


def require_audio(source, prog):
    """Exits 4 with has_audio.py's one line when the file or URI has no audio stream,
    before any pipeline is built; goes on when it has one or the probe cannot tell
    (pipelines/lib.sh, cony_media_input; CONY_AUDIO_PROBE=off skips it)."""
    if os.environ.get("CONY_AUDIO_PROBE") == "off":
        return
    # a process of its own: the probe's last-resort SIGALRM must not end this one
    probe = subprocess.run([sys.executable, os.path.join(ROOT, "pipelines", "has_audio.py"),
                            source, "--label", f"{prog}: {source}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if probe.returncode == 4:
        sys.stderr.write(probe.stderr)
        sys.exit(4)


class Printer:
    """Prints records as they come (flushed at once). When the reader goes away (e.g.
    `| head -1`), `closed` is set and nothing more is written: no BrokenPipeError
    tracebacks from the bus callback."""

    def __init__(self, as_json):
        self.as_json = as_json
        self.closed = False

    def emit(self, record):
        if self.closed:
            return
        try:
            print(self.format(record), flush=True)
        except BrokenPipeError:
            self.closed = True
            # Python flushes stdout again at exit: point it at /dev/null first.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def format(self, record):
        if self.as_json:
            return json.dumps(record)
        extra = ""
        if "segment_start" in record:
            extra = f"  (since {seconds(record['segment_start'])} s)"
        return (f"{seconds(record['time']):>8} s  {record['label']:<20} "
                f"{record['confidence']:.3f}{extra}")


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


def add_pipeline_arguments(ap):
    """The source, model and conytransformer options (shared with mqtt_publish.py)."""
    ap.add_argument("source", nargs="?", default="test",
                    help="media file or URI, 'mic', 'test' (default) or a GStreamer "
                         "source description, e.g. 'audiotestsrc is-live=true'")
    ap.add_argument("--vggish", default=os.environ.get("CONY_VGGISH"),
                    help="front-end CNN (default: the one the classifier's config names)")
    ap.add_argument("--transformer", default=os.environ.get(
        "CONY_TRANSFORMER", os.path.join(ROOT, "models", "audio", "transformer.safetensors")))
    ap.add_argument("--labels-file", help="one label per line (default: the model's labels)")
    ap.add_argument("--attention", help="override the model's attention variant")
    ap.add_argument("--message-mode", choices=["every-step", "on-change"], default="every-step")
    ap.add_argument("--threshold", type=float, default=0.0)


def frontend_of(transformer):
    with open(transformer, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n)).get("__metadata__", {})
    return json.loads(meta.get("config", "{}")).get("frontend") or {}


def default_cnn(transformer):
    """The CNN the classifier names (frontend.cnn) beside it or in one of models/*/ (as
    pipelines/lib.sh's cony_default_cnn); vggish.safetensors when it names none."""
    name = frontend_of(transformer).get("cnn", "vggish.safetensors")
    models = os.path.join(ROOT, "models")
    for d in [os.path.dirname(os.path.abspath(transformer))] + [
            os.path.join(models, d) for d in sorted(os.listdir(models))]:
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    return os.path.join(os.path.dirname(transformer), name)


def token_props(transformer):
    """(conymel, conyvggish) properties the classifier's tokens were made with, from its
    config's frontend (as pipelines/lib.sh's cony_token_props): YAMNet's log-mel preset,
    the CNN's pooled embedding as the token."""
    fe = frontend_of(transformer)
    return ("preset=yamnet" if fe.get("name") == "yamnet" else "",
            "output=embedding" if fe.get("cnn_output") == "embedding" else "")


def build_pipeline(args, prog, extra_props=""):
    """SOURCE ! audioconvert ! audioresample ! conymel ! conyvggish ! conytransformer
    name=classifier ! fakesink from add_pipeline_arguments' options; exits with a message
    naming what is wrong."""
    if "GST_PLUGIN_PATH" not in os.environ and os.path.isdir(os.path.join(ROOT, "build", "gst")):
        os.environ["GST_PLUGIN_PATH"] = os.path.join(ROOT, "build", "gst")
    Gst.init(None)
    if not args.vggish and os.path.exists(args.transformer):
        args.vggish = default_cnn(args.transformer)
    for path in (args.transformer, args.vggish):
        if not os.path.exists(path):
            sys.exit(f"{prog}: model file {path} not found (see --vggish / --transformer)")
    props = f'model="{args.transformer}" message-mode={args.message_mode} threshold={args.threshold}'
    if args.labels_file:
        props += f' labels-file="{args.labels_file}"'
    if args.attention:
        props += f" attention={args.attention}"
    props += extra_props
    source = source_description(args.source, prog)
    live = args.source == "mic" or "is-live=true" in source
    mel, cnn = token_props(args.transformer)
    desc = (f"{source} ! audioconvert ! audioresample ! conymel {mel} "
            f'! conyvggish model="{args.vggish}" {cnn} ! conytransformer name=classifier {props} '
            f"! fakesink sync={'true' if live else 'false'}")
    try:
        return Gst.parse_launch(desc)
    except GLib.Error as e:
        sys.exit(f"{prog}: {e.message}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pipeline_arguments(ap)
    ap.add_argument("--json", action="store_true", help="print JSON lines")
    ap.add_argument("--from-meta", action="store_true",
                    help="read the results from the buffers' custom meta instead of the bus")
    args = ap.parse_args()

    pipeline = build_pipeline(args, "print_results.py",
                              " post-messages=false" if args.from_meta else "")
    printer = Printer(args.json)
    loop = GLib.MainLoop()
    if args.from_meta:
        def probe(pad, info):
            for rec in records_from_buffer(info.get_buffer()):
                printer.emit(rec)
            if printer.closed:
                loop.quit()   # thread-safe: the reader has gone
            return Gst.PadProbeReturn.OK
        pad = pipeline.get_by_name("classifier").get_static_pad("src")
        pad.add_probe(Gst.PadProbeType.BUFFER, probe)

    def on_result(record):
        printer.emit(record)
        return not printer.closed

    sys.exit(run(pipeline, loop, "print_results.py", on_result))


def run(pipeline, loop, prog, on_result):
    """Plays @pipeline until EOS, an error, Ctrl-C or @on_result(record) returning False;
    @on_result gets each conytransformer bus message as a record_from_message() dict.
    Returns the exit status: 0, or 1 after an error (printed on stderr)."""
    status = {"rc": 0}

    def on_message(bus, msg):
        t = msg.type
        if t == Gst.MessageType.ELEMENT:
            s = msg.get_structure()
            if s is not None and s.get_name() == "conytransformer":
                if not on_result(record_from_message(s)):
                    loop.quit()
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"{prog}: error from {msg.src.get_name()}: {err.message}\n{dbg}",
                  file=sys.stderr)
            status["rc"] = 1
            loop.quit()
        elif t == Gst.MessageType.WARNING:
            err, dbg = msg.parse_warning()
            print(f"{prog}: warning from {msg.src.get_name()}: {err.message}", file=sys.stderr)
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
            print(f"{prog}: {err.message}\n{dbg}", file=sys.stderr)
        pipeline.set_state(Gst.State.NULL)
        return 1
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    pipeline.set_state(Gst.State.NULL)
    bus.remove_signal_watch()
    return status["rc"]


if __name__ == "__main__":
    main()
