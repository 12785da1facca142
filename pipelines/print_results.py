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
introspection: what an application that handles the buffers itself would do). With
--json each line is a record of docs/results.schema.json, conyjson's: a "result" per
step (`source` = SOURCE; the messages and the meta carry the record's fields under its
names; `events` of the step, or in on-change mode the events a message stands for) and
an "eos" record for a segment that EOS closed (on-change mode).

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
    """Nanoseconds as seconds to 0.01, rounded half up exactly (0.975 s is 0.98, as
    pipelines/lib.sh's cony_format prints it; a float would give 0.97 or 0.98 by chance)."""
    if value is None:
        return "-"
    cs = (value + 5_000_000) // 10_000_000
    return f"{cs // 100}.{cs % 100:02d}"


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
        if record["type"] == "eos":
            return "     eos  " + ", ".join(
                f"{e['label']} ended ({seconds(e['segment_start'])}-{seconds(e['segment_end'])} s)"
                for e in record["events"])
        if record.get("gated"):
            return f"{seconds(record['stream_end']):>8} s  (below the level gate)"
        onsets = [e for e in record.get("events", []) if e["event"] == "onset"]
        extra = f"  (since {seconds(onsets[-1]['segment_start'])} s)" if onsets else ""
        return (f"{seconds(record['stream_end']):>8} s  {record['label']:<20} "
                f"{record['score']:.3f}{extra}")


# The records are those of docs/results.schema.json (conyjson's): "result" for a step,
# "eos" for the segments that EOS closes.

def score(x):
    """Float precision (7 significant digits), as conyjson writes scores."""
    return float(f"{x:.7g}")


def event(kind, class_id, label, start, end=None):
    return {"event": kind, "class_id": class_id, "label": label,
            "segment_start": ns(start), "segment_end": ns(end)}


# The fields an on-change message adds to the step's result (docs/elements.md, "Segments").
MESSAGE_EXTRAS = {"event", "segment_start", "segment_end", "previous_label",
                  "previous_segment_start", "previous_segment_end", "eos"}


def py(v):
    """A structure value as conyjson writes it: structures as dicts, floats to float
    precision (7 significant digits), GST_CLOCK_TIME_NONE (an unknown time) as None."""
    if isinstance(v, Gst.Structure):
        return fields(v)
    if isinstance(v, float):
        return score(v)
    if isinstance(v, int) and not isinstance(v, bool) and v == Gst.CLOCK_TIME_NONE:
        return None
    return v


def value(s, field):
    """Field @field of structure @s as conyjson writes it; a GST_TYPE_ARRAY as a list,
    converted while the array that owns its structures is alive (they are not copies)."""
    ok, arr = s.get_array(field)
    if ok:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return [py(arr.get_nth(i)) for i in range(arr.n_values)]
    return py(s.get_value(field))


def fields(s, names=None):
    """The fields @names (default: all, in order) of structure @s that it has, as a dict."""
    if names is None:
        names = [s.nth_field_name(i) for i in range(s.n_fields())]
    return {n: value(s, n) for n in names if s.has_field(n)}


def result_record(s, source):
    """The "result" record of a conytransformer message or custom meta structure @s:
    both carry the record's fields under its names (the element's result table), a
    message also those of its segment event."""
    head = {"type": "result"} if source is None else {"type": "result", "source": source}
    names = [s.nth_field_name(i) for i in range(s.n_fields())]
    return head | fields(s, [n for n in names if n not in MESSAGE_EXTRAS])


def message_events(s, labels):
    """The segment events an on-change message stands for (none in every-step mode: the
    step's own `events` are the message's)."""
    if s.has_field("event"):          # sigmoid: one label's onset or offset
        return [fields(s, ("event", "class_id", "label", "segment_start", "segment_end"))]
    if not s.has_field("segment_start"):
        return None
    prev = s.get_string("previous_label")
    if s.has_field("eos"):            # softmax, EOS: the open segment ends
        return [event("offset", s.get_value("class_id"), prev,
                      s.get_value("previous_segment_start"), s.get_value("previous_segment_end"))]
    events = []
    if prev:
        events.append(event("offset", labels.index(prev) if prev in labels else None, prev,
                            s.get_value("previous_segment_start"),
                            s.get_value("previous_segment_end")))
    events.append(event("onset", s.get_value("class_id"), s.get_string("label"),
                        s.get_value("segment_start")))
    return events


def record_from_message(s, source=None, labels=()):
    """The record of a conytransformer bus message: "result", or "eos" for a message
    that closes a segment at EOS (on-change mode). @labels: the classifier's labels
    (for the class id of a segment that ended)."""
    events = message_events(s, list(labels))
    if s.has_field("eos"):
        rec = {"type": "eos", "step": int(s.get_value("step")), "events": events}
        return rec if source is None else {"type": "eos", "source": source} | rec
    rec = result_record(s, source)
    if events is not None:            # one message per event (sigmoid): that event only
        rec["events"] = events
    return rec


def records_from_buffer(buf, source=None):
    """The classification on a buffer, from the custom meta mirror. get_custom_meta()
    returns one meta; after conyvggish every buffer holds one token, hence one step."""
    meta = buf.get_custom_meta(CUSTOM_META)
    if meta is None:
        return []
    return [result_record(meta.get_structure(), source)]


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
    the CNN's pooled embedding as the token, a continual CNN with its stride."""
    fe = frontend_of(transformer)
    cnn = ["output=embedding"] if fe.get("cnn_output") == "embedding" else []
    if fe.get("cnn_mode") == "continual":
        cnn.append("mode=continual")
        if "stride_frames" in fe:
            cnn.append(f"stride={int(fe['stride_frames'])}")
    return ("preset=yamnet" if fe.get("name") == "yamnet" else "", " ".join(cnn))


def parse_launch(desc, prog):
    """Gst.parse_launch(@desc), or exits with its error; when GStreamer has no cony
    elements, with where to point it (pipelines/lib.sh, cony_plugin_hint)."""
    try:
        return Gst.parse_launch(desc)
    except GLib.Error as e:
        hint = ""
        if 'no element "cony' in e.message:
            hint = ("; GStreamer has no cony elements (libgstcony.so): build it "
                    "(scripts/build.sh) or, installed under a prefix other than /usr, export "
                    "GST_PLUGIN_PATH=PREFIX/lib/ARCH/gstreamer-1.0")
        sys.exit(f"{prog}: {e.message}{hint}")


def build_pipeline(args, prog, extra_props="", sink=None):
    """SOURCE ! audioconvert ! audioresample ! conymel ! conyvggish ! conytransformer
    name=classifier ! SINK (default fakesink) from add_pipeline_arguments' options; exits
    with a message naming what is wrong."""
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
            f"! {sink or 'fakesink sync=' + ('true' if live else 'false')}")
    return parse_launch(desc, prog)


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
            for rec in records_from_buffer(info.get_buffer(), args.source):
                printer.emit(rec)
            if printer.closed:
                loop.quit()   # thread-safe: the reader has gone
            return Gst.PadProbeReturn.OK
        pad = pipeline.get_by_name("classifier").get_static_pad("src")
        pad.add_probe(Gst.PadProbeType.BUFFER, probe)

    def on_result(record):
        printer.emit(record)
        return not printer.closed

    sys.exit(run(pipeline, loop, "print_results.py", on_result, args.source))


def run(pipeline, loop, prog, on_result, source=None, on_element=None):
    """Plays @pipeline until EOS, an error, Ctrl-C or @on_result(record) returning False;
    @on_result gets each conytransformer bus message as a record_from_message() dict
    (with @source), @on_element the structure of any other element message. Returns the
    exit status: 0, or 1 after an error (printed on stderr)."""
    status = {"rc": 0}
    classifier = pipeline.get_by_name("classifier")

    def on_message(bus, msg):
        t = msg.type
        if t == Gst.MessageType.ELEMENT:
            s = msg.get_structure()
            if s is not None and s.get_name() == "conytransformer":
                labels = classifier.get_property("labels") or []
                if not on_result(record_from_message(s, source, labels)):
                    loop.quit()
            elif s is not None and on_element is not None:
                on_element(s)
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"{prog}: error from {msg.src.get_name()}: {err.message}\n{dbg}",
                  file=sys.stderr)
            status["rc"] = 1
            loop.quit()
        elif t == Gst.MessageType.WARNING:
            err, dbg = msg.parse_warning()
            detail = dbg.splitlines()[-1].split(": ", 1)[-1] if dbg else ""
            print(f"{prog}: warning from {msg.src.get_name()}: {err.message}"
                  + (f" ({detail})" if detail else ""), file=sys.stderr)
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
