#!/usr/bin/python3
"""Draws what the classifier heard in a media file as one PNG picture.

    pipelines/timeline.py FILE [-o OUT.png] [--width 1600] [--height 900] [--top-k 3]

Top to bottom, on one time axis (seconds of the file):
  * the log-mel spectrogram the CNN sees (conymel's own frames), with the element's label
    segments as coloured bands, each named;
  * the label track: the top label of every step, one colour per label;
  * the top-k labels' scores over time (the k labels with the highest mean score).
A step is drawn at its token's time, from the start of its CNN window (0.975 s of audio)
for one stride (0.25 s), as the element times its segments (docs/elements.md, "Time
spans"). One line on stdout says what was drawn (steps, share of each label, segments);
progress goes to stderr every --progress-every seconds while the file is being read.

The pipeline is the element chain itself, read through appsinks:
  uridecodebin ! audioconvert ! audioresample ! conymel ! tee
    ! queue ! appsink (the spectrogram)
    ! queue ! conyvggish batch=64 ! conytransformer post-messages=false ! appsink (the
      results, from each buffer's classification meta: scores and segment events)
Models as pipelines/print_results.py: --vggish / --transformer or CONY_VGGISH /
CONY_TRANSFORMER, default the shipped audio model. --min-steps / --min-duration steady the
segments (conytransformer's properties of those names).
Needs python3-gi, gir1.2-gstreamer-1.0 and python3-matplotlib (scripts/setup.sh).
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import print_results as pr  # noqa: E402  (pipelines/print_results.py: models, GStreamer)
from print_results import GLib, Gst  # noqa: E402

PROG = "timeline.py"
N_MELS = 64
TOKEN_SECONDS = 0.25


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="media file or URI (anything uridecodebin decodes)")
    ap.add_argument("-o", "--output", help="PNG to write (default: FILE.timeline.png here)")
    ap.add_argument("--width", type=int, default=1600, help="pixels (default 1600)")
    ap.add_argument("--height", type=int, default=900, help="pixels (default 900)")
    ap.add_argument("--top-k", type=int, default=3, help="score curves drawn (default 3)")
    ap.add_argument("--min-steps", type=int, default=1, help="conytransformer min-steps")
    ap.add_argument("--min-duration", type=int, default=0, help="conytransformer min-duration (ns)")
    ap.add_argument("--title", help="figure title (default: the file name)")
    ap.add_argument("--progress-every", type=float, default=2.0,
                    help="seconds between progress lines on stderr (default 2)")
    ap.add_argument("--vggish", default=os.environ.get("CONY_VGGISH"))
    ap.add_argument("--transformer", default=os.environ.get(
        "CONY_TRANSFORMER", os.path.join(pr.ROOT, "models", "audio", "transformer.safetensors")))
    args = ap.parse_args(argv)
    if args.width < 200 or args.height < 200 or args.top_k < 1 or args.min_steps < 1:
        ap.error("--width and --height need at least 200 pixels, --top-k and --min-steps 1")
    if not args.output:
        args.output = os.path.basename(args.file.rstrip("/")) + ".timeline.png"
    return args


def build(args):
    if "GST_PLUGIN_PATH" not in os.environ and os.path.isdir(os.path.join(pr.ROOT, "build", "gst")):
        os.environ["GST_PLUGIN_PATH"] = os.path.join(pr.ROOT, "build", "gst")
    Gst.init(None)
    if not args.vggish and os.path.exists(args.transformer):
        args.vggish = pr.default_cnn(args.transformer)
    for path in (args.transformer, args.vggish):
        if not os.path.exists(path):
            sys.exit(f"{PROG}: model file {path} not found (see --vggish / --transformer)")
    if Gst.uri_is_valid(args.file):
        uri = args.file
    elif os.path.isfile(args.file):
        uri = Gst.filename_to_uri(os.path.abspath(args.file))
    else:
        sys.exit(f"{PROG}: {args.file} not found")
    pr.require_audio(args.file, PROG)
    mel, cnn = pr.token_props(args.transformer)
    desc = (f'uridecodebin uri="{uri}" ! audioconvert ! audioresample ! conymel {mel} ! tee name=t '
            # (unbounded: the other branch holds 64 windows back before its first result,
            # and a full queue here would stall the tee)
            "t. ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=0 "
            "! appsink name=mel sync=false "
            f't. ! queue ! conyvggish model="{args.vggish}" {cnn} batch=64 '
            f'! conytransformer name=classifier model="{args.transformer}" post-messages=false '
            f"top-k={args.top_k} min-steps={args.min_steps} min-duration={args.min_duration} "
            "! appsink name=results sync=false")
    return pr.parse_launch(desc, PROG)


def segment_events(s):
    """The meta's segment events as (event, class id, start ns, end ns), read while the
    array that owns them is alive (its structures are not copies)."""
    ok, arr = s.get_array("events")
    if not ok:
        return []
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for i in range(arr.n_values):
            e = arr.get_nth(i)
            out.append((e.get_string("event"), e.get_value("class_id"),
                        pr.ns(e.get_value("segment_start")), pr.ns(e.get_value("segment_end"))))
    return out


class Collector:
    """Pulls the spectrogram frames and the per-step results off the two appsinks."""

    def __init__(self, pipeline):
        self.frames, self.steps, self.labels = [], [], {}
        for name, cb in (("mel", self.on_mel), ("results", self.on_result)):
            sink = pipeline.get_by_name(name)
            sink.set_property("emit-signals", True)
            sink.connect("new-sample", cb)

    def on_mel(self, sink):
        buf = sink.emit("pull-sample").get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        if ok:
            self.frames.append(np.frombuffer(info.data, np.float32).copy())
            buf.unmap(info)
        return Gst.FlowReturn.OK

    def on_result(self, sink):
        buf = sink.emit("pull-sample").get_buffer()
        meta = buf.get_custom_meta(pr.CUSTOM_META)
        if meta is not None:
            s = meta.get_structure()
            events = segment_events(s)
            # a gated step (below the level gate) has no class: -1, "" as the meta's
            cid = s.get_value("class_id") if s.has_field("class_id") else -1
            self.steps.append((pr.ns(s.get_value("pts")), cid, pr.float_array(s, "scores"),
                               events))
            self.labels[cid] = s.get_string("label") or ""
            for _, cid, _, _ in events:
                self.labels.setdefault(cid, "")
        return Gst.FlowReturn.OK


def run(pipeline, every):
    """Plays to EOS; progress on stderr; exits 1 on an error."""
    loop = GLib.MainLoop()
    status = {"rc": 0}

    def on_message(bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"{PROG}: error from {msg.src.get_name()}: {err.message}\n{dbg}", file=sys.stderr)
            status["rc"] = 1
            loop.quit()
        elif msg.type == Gst.MessageType.EOS:
            loop.quit()

    def progress():
        ok_p, pos = pipeline.query_position(Gst.Format.TIME)
        ok_d, dur = pipeline.query_duration(Gst.Format.TIME)
        if ok_p and ok_d and dur > 0:
            print(f"{PROG}: {100 * pos / dur:.0f} % ({pos / Gst.SECOND:.1f} of "
                  f"{dur / Gst.SECOND:.1f} s)", file=sys.stderr, flush=True)
        elif ok_p:
            print(f"{PROG}: {pos / Gst.SECOND:.1f} s", file=sys.stderr, flush=True)
        return True

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    timer = GLib.timeout_add(max(1, int(every * 1000)), progress)
    if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        msg = bus.timed_pop_filtered(Gst.SECOND, Gst.MessageType.ERROR)
        if msg:
            print(f"{PROG}: {msg.parse_error()[0].message}", file=sys.stderr)
        status["rc"] = 1
    else:
        try:
            loop.run()
        except KeyboardInterrupt:
            status["rc"] = 130
    GLib.source_remove(timer)
    pipeline.set_state(Gst.State.NULL)
    bus.remove_signal_watch()
    return status["rc"]


def label_colour(cid):
    import matplotlib
    cmap = matplotlib.colormaps["tab10" if cid < 10 else "tab20"]
    return cmap(cid % cmap.N)[:3]


def segments_of(steps):
    """(class id, start s, end s) from the metas' segment events; a segment still open at
    the end (its closing is a bus message only) ends with the last step."""
    out, open_ = [], {}
    for _, _, _, events in steps:
        for ev, cid, start, end in events:
            if ev == "onset":
                open_[cid] = start
            elif cid in open_:
                out.append((cid, open_.pop(cid) / 1e9, end / 1e9))
    if steps:
        last = steps[-1][0] / 1e9 + TOKEN_SECONDS
        out += [(cid, start / 1e9, last) for cid, start in open_.items()]
    return sorted(out, key=lambda seg: seg[1])


def spectrogram_image(frames, max_columns):
    """(N_MELS, columns) image of the frames, averaged down to at most max_columns."""
    k = max(1, int(np.ceil(len(frames) / max_columns)))
    n = len(frames) // k * k
    img = frames[:n].reshape(-1, k, N_MELS).mean(1) if n else frames
    return img.T


def draw(args, frames, steps, labels):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    dpi = 100
    fig = plt.figure(figsize=(args.width / dpi, args.height / dpi), dpi=dpi)
    grid = fig.add_gridspec(3, 1, height_ratios=[3, 0.45, 2], hspace=0.12)
    ax_mel, ax_track, ax_scores = (fig.add_subplot(grid[i]) for i in range(3))
    seconds = len(frames) * 0.01
    ax_mel.imshow(spectrogram_image(frames, args.width), aspect="auto", origin="lower",
                  cmap="magma", extent=(0, seconds, 0, N_MELS), interpolation="nearest")
    ax_mel.set_ylabel("log-mel band")
    ax_mel.set_title(args.title or os.path.basename(args.file))

    segs = segments_of(steps)
    for cid, start, end in segs:
        ax_mel.axvspan(start, end, ymin=0.9, ymax=1.0, color=label_colour(cid), alpha=0.85, lw=0)
        if end - start > seconds / 40:
            ax_mel.text((start + end) / 2, N_MELS * 0.95, labels.get(cid, str(cid)), ha="center",
                        va="center", fontsize=8, color="white", clip_on=True)

    # the label track: one bar per step, in its label's colour (no edges: exact colours)
    t = np.array([pts / 1e9 for pts, _, _, _ in steps])
    top = np.array([cid for _, cid, _, _ in steps])
    for cid in sorted(set(top.tolist())):
        ax_track.broken_barh([(x, TOKEN_SECONDS) for x in t[top == cid]], (0, 1),
                             facecolors=[label_colour(cid)], edgecolor="none", antialiased=False)
    ax_track.set_ylim(0, 1)
    ax_track.set_yticks([])
    ax_track.set_ylabel("label", rotation=0, ha="right", va="center")

    scores = np.array([s for _, _, s, _ in steps]) if steps else np.zeros((0, 1))
    k = min(args.top_k, scores.shape[1]) if len(scores) else 0
    best = np.argsort(-scores.mean(0))[:k] if len(scores) else []
    for cid in best:
        ax_scores.step(t, scores[:, cid], where="post", color=label_colour(int(cid)),
                       label=labels.get(int(cid), str(cid)))
    ax_scores.set_ylim(0, 1.02)
    ax_scores.set_ylabel("score")
    ax_scores.set_xlabel("time (s)")
    if k:
        ax_scores.legend(loc="upper right", fontsize=8, ncol=k)
    present = sorted(set(top.tolist()))
    ax_track.legend(handles=[Patch(color=label_colour(c), label=labels.get(c, str(c))) for c in present],
                    loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    for ax in (ax_mel, ax_track, ax_scores):
        ax.set_xlim(0, max(seconds, t[-1] + TOKEN_SECONDS if len(t) else 0))
    for ax in (ax_mel, ax_track):
        ax.tick_params(labelbottom=False)
    # margins in pixels, so that labels fit at any size
    fig.subplots_adjust(left=75 / args.width, right=1 - 100 / args.width, top=1 - 30 / args.height,
                        bottom=48 / args.height)
    fig.savefig(args.output, dpi=dpi)
    plt.close(fig)
    return segs, top


def main(argv=None):
    args = parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(f"{PROG}: needs python3-matplotlib (scripts/setup.sh installs it)")
    pipeline = build(args)
    got = Collector(pipeline)
    rc = run(pipeline, args.progress_every)
    if rc != 0:
        return rc
    frames = np.concatenate(got.frames).reshape(-1, N_MELS) if got.frames else np.zeros((0, N_MELS))
    if not got.steps:
        sys.exit(f"{PROG}: {args.file}: no result (no audio decoded)")
    segs, top = draw(args, frames, got.steps, got.labels)
    share = ", ".join(f"{got.labels[c]} {100 * np.mean(top == c):.0f} %"
                      for c in sorted(set(top.tolist()), key=lambda c: -np.mean(top == c)))
    colours = ", ".join(f"{got.labels[c]} #{''.join(f'{round(255 * v):02x}' for v in label_colour(c))}"
                        for c in sorted(set(top.tolist())))
    print(f"wrote {args.output} ({args.width}x{args.height}): {len(got.steps)} steps over "
          f"{len(frames) * 0.01:.1f} s; labels {share}; {len(segs)} segments; colours {colours}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
