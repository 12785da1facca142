#!/usr/bin/python3
"""Shows video with the current label drawn on it: textoverlay fed from conytransformer.

    pipelines/overlay.py [SOURCE] [--output OUT.mkv] [--num-buffers N] [--cnn F] [--classifier F]

SOURCE: `camera` (the default: the camera GStreamer's device monitor finds; none: an
error naming `test` instead of a silent stand-in), `test` (videotestsrc pattern=ball) or a media file path. The video is split
with a tee: one branch goes through

    videoconvert ! videorate ! conyframeembed [! conytransformer] ! fakesink

and the other through `textoverlay` to the screen (autovideosink) or, with --output, to
an MJPEG Matroska file. Each `conytransformer` bus message (one per step; with
--classifier none, the default, each `conyframeembed` message: the ImageNet label of
each frame) sets
textoverlay's text to "label confidence" from the main loop (the label's first name: an
ImageNet label lists its synonyms; wrapped to the frame), so the text follows the
classification with the delay of the bus (milliseconds) plus the model's own context
(the label of a step is about the last `window` frames). Labels are also printed.

When the textoverlay element is not installed (it is in the pango plugin of
gst-plugins-base, libgstpango.so, which Debian ships in the gstreamer1.0-x package,
absent from minimal installs), or with --bitmap-font, the
label is drawn by `overlaycomposition` (plugins-base) from a small built-in 5x7 bitmap
font (lower-case letters, digits, '-', '.', needs numpy) instead; the script says which.

Needs python3-gi and gir1.2-gstreamer-1.0, and the plugin on GST_PLUGIN_PATH (default:
build/gst of this checkout). Models: --cnn / --classifier, or $CONY_VIDEO_CNN /
$CONY_VIDEO_CLASSIFIER, default models/imagenet/mobilenet_v2.safetensors and the continual
tagger models/video-tagger/tagger.safetensors over its embeddings (conyframeembed
output=embedding, as the classifier's frontend.cnn_output says); --classifier none: the
MobileNet's own label per frame; the synthetic toy of models/video/: --cnn
models/video/frame_cnn.safetensors --classifier models/video/classifier.safetensors.
"""

import argparse
import json
import os
import signal
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("GST_PLUGIN_PATH", os.path.join(ROOT, "build", "gst"))

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

from print_results import parse_launch, seconds  # noqa: E402


# A 5x7 bitmap font for the fallback drawing (overlaycomposition) when textoverlay is
# missing: enough for labels and confidences.
FONT = {
    "a": ".....|.....|.###.|....#|.####|#...#|.####", "b": "#....|#....|####.|#...#|#...#|#...#|####.",
    "c": ".....|.....|.####|#....|#....|#....|.####", "d": "....#|....#|.####|#...#|#...#|#...#|.####",
    "e": ".....|.....|.###.|#...#|#####|#....|.###.", "f": "..##.|.#...|####.|.#...|.#...|.#...|.#...",
    "g": ".....|.####|#...#|#...#|.####|....#|.###.", "h": "#....|#....|####.|#...#|#...#|#...#|#...#",
    "i": "..#..|.....|.##..|..#..|..#..|..#..|.###.", "j": "...#.|.....|..##.|...#.|...#.|#..#.|.##..",
    "k": "#....|#....|#..#.|#.#..|##...|#.#..|#..#.", "l": ".##..|..#..|..#..|..#..|..#..|..#..|.###.",
    "m": ".....|.....|##.#.|#.#.#|#.#.#|#.#.#|#.#.#", "n": ".....|.....|####.|#...#|#...#|#...#|#...#",
    "o": ".....|.....|.###.|#...#|#...#|#...#|.###.", "p": ".....|####.|#...#|#...#|####.|#....|#....",
    "q": ".....|.####|#...#|#...#|.####|....#|....#", "r": ".....|.....|#.##.|##..#|#....|#....|#....",
    "s": ".....|.....|.####|#....|.###.|....#|####.", "t": ".#...|.#...|####.|.#...|.#...|.#..#|..##.",
    "u": ".....|.....|#...#|#...#|#...#|#...#|.####", "v": ".....|.....|#...#|#...#|#...#|.#.#.|..#..",
    "w": ".....|.....|#...#|#.#.#|#.#.#|#.#.#|.#.#.", "x": ".....|.....|#...#|.#.#.|..#..|.#.#.|#...#",
    "y": ".....|#...#|#...#|#...#|.####|....#|.###.", "z": ".....|.....|#####|...#.|..#..|.#...|#####",
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.", "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####", "3": "####.|....#|....#|.###.|....#|....#|####.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.", "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.", "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.", "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "-": ".....|.....|.....|#####|.....|.....|.....", ".": ".....|.....|.....|.....|.....|.##..|.##..",
    "_": ".....|.....|.....|.....|.....|.....|#####", " ": ".....|.....|.....|.....|.....|.....|.....",
}


def overlay_text(label, confidence):
    """What the picture shows: the label's first name (an ImageNet label lists its
    synonyms, "koala, koala bear, kangaroo bear, native bear, Phascolarctos cinereus")
    and the score."""
    return f"{label.split(',')[0].strip()} {confidence:.2f}"


def render_text(text, max_width=None, scale=3):
    """BGRA pixels (h, w, 4) uint8 of @text in the 5x7 font, white on translucent black
    (premultiplied alpha, as GstVideoOverlayRectangle takes it by default), broken into
    lines at spaces so that it is at most @max_width pixels wide (the font is drawn
    smaller, down to 1 pixel a dot, where a frame is too narrow for 12 characters a line
    at @scale; a word longer than a line is cut into pieces)."""
    import textwrap

    import numpy as np
    text = text.lower()
    per_line = len(text) or 1
    if max_width is not None:
        while scale > 1 and (max_width - 2 * scale) // (6 * scale) < 12:
            scale -= 1
        per_line = max(1, (max_width - 2 * scale) // (6 * scale))
    lines = textwrap.wrap(text, per_line) or [""]
    width = max(len(line) for line in lines)
    rows = []
    for line in lines:
        cols = [np.zeros((7, 0), bool)]
        for ch in line.ljust(width):
            glyph = FONT.get(ch, FONT[" "]).split("|")
            cols += [np.array([[c == "#" for c in r] for r in glyph], dtype=bool), np.zeros((7, 1), bool)]
        rows += [np.concatenate(cols, axis=1), np.zeros((1, 6 * width), bool)]
    mask = np.pad(np.concatenate(rows[:-1], axis=0), 1).repeat(scale, 0).repeat(scale, 1)
    img = np.zeros(mask.shape + (4,), np.uint8)
    img[..., 3] = 160                      # background: black at 63 % opacity
    img[mask] = (255, 255, 255, 255)
    return np.ascontiguousarray(img)


def source_desc(source, num_buffers):
    nb = f" num-buffers={num_buffers}"
    if source == "camera":
        import devices  # pipelines/devices.py; none: exit 3 (devices.NO_DEVICE)
        return devices.require("video", "overlay.py", "use 'test' for videotestsrc's ball") + nb
    if source == "test":
        return f"videotestsrc pattern=ball{nb}"
    if not os.path.exists(source):
        raise SystemExit(f"overlay.py: {source} not found")
    loc = source.replace("\\", "\\\\").replace('"', '\\"')
    # (filesrc's num-buffers counts blocks of bytes, not frames: limit_frames() counts
    # them after decoding, at this identity)
    limit = " ! identity name=limit" if num_buffers > 0 else ""
    return f'filesrc location="{loc}" ! decodebin{limit}'


def limit_frames(pad, count):
    """Lets @count buffers through @pad, then ends the stream there: EOS downstream, and
    FLOW_EOS upstream for every later buffer, so the source stops reading. (identity's
    eos-after is not used: behind decodebin it lets N-1 or N buffers through, by chance.)"""
    seen = [0]

    def probe(pad, info):
        seen[0] += 1
        if seen[0] <= count:
            return Gst.PadProbeReturn.OK
        if seen[0] == count + 1:
            pad.push_event(Gst.Event.new_eos())   # marks @pad EOS: later pushes fail
        return Gst.PadProbeReturn.DROP

    pad.add_probe(Gst.PadProbeType.BUFFER, probe)


def cnn_output(classifier):
    """The conyframeembed output a classifier was trained on: its config's
    frontend.cnn_output ("embedding" for the tagger), "scores" otherwise."""
    if classifier == "none":
        return "scores"
    with open(classifier, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    config = json.loads(header.get("__metadata__", {}).get("config", "{}"))
    return config.get("frontend", {}).get("cnn_output", "scores")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default="camera")
    ap.add_argument("--output", help="write the labelled video here (MJPEG in Matroska)")
    ap.add_argument("--num-buffers", type=int, default=-1,
                    help="stop after N video frames of the source (default: all)")
    ap.add_argument("--fps", type=int, default=int(os.environ.get("CONY_VIDEO_FPS", "10")),
                    help="frames per second fed to the CNN (default 10)")
    ap.add_argument("--cnn", default=os.environ.get(
        "CONY_VIDEO_CNN", os.path.join(ROOT, "models", "imagenet", "mobilenet_v2.safetensors")),
        help="frame CNN (default the ImageNet MobileNet-v2)")
    ap.add_argument("--classifier", default=os.environ.get("CONY_VIDEO_CLASSIFIER", os.path.join(
        ROOT, "models", "video-tagger", "tagger.safetensors")),
                    help="classifier over the CNN's tokens (default the continual ImageNet "
                         "tagger of models/video-tagger/), or none: the CNN's own labels per "
                         "frame")
    ap.add_argument("--size", default="640x480",
                    help="picture size for camera/test sources (default 640x480)")
    ap.add_argument("--quiet", action="store_true", help="do not print the labels")
    ap.add_argument("--bitmap-font", action="store_true",
                    help="draw with overlaycomposition and the built-in font even when "
                         "textoverlay is there")
    args = ap.parse_args(argv)
    Gst.init(None)
    for m in (args.cnn, args.classifier):
        if m != "none" and not os.path.isfile(m):
            raise SystemExit(f"overlay.py: model file {m} not found")

    have_text = Gst.ElementFactory.find("textoverlay") is not None and not args.bitmap_font
    use_comp = not have_text and Gst.ElementFactory.find("overlaycomposition") is not None
    if not have_text:
        print("overlay.py: " + ("textoverlay is not installed (the pango plugin; on Debian: "
                                "apt-get install gstreamer1.0-x): " if not args.bitmap_font else "")
              + ("drawing the labels with overlaycomposition and a built-in bitmap font"
                 if use_comp else "showing the video without text, printing the labels"),
              file=sys.stderr)
    live_file = args.output is None and args.source not in ("camera", "test")
    if args.output:
        out = args.output.replace('"', '\\"')
        sink = f'videoconvert ! jpegenc ! matroskamux ! filesink location="{out}"'
    else:
        sink = f"videoconvert ! autovideosink sync={'true' if live_file else 'false'}"
    if have_text:
        draw = ('textoverlay name=overlay valignment=top halignment=left font-desc="Sans 20" '
                'shaded-background=true text="..." ! ')
    elif use_comp:
        draw = "videoconvert ! overlaycomposition name=comp ! "
    else:
        draw = ""

    # The tee gives both branches the same caps: without a size here, a camera or
    # videotestsrc would settle for the CNN's tiny input size.
    size = ""
    if args.source in ("camera", "test"):
        w, h = args.size.split("x")
        size = f"videoscale ! video/x-raw,width={int(w)},height={int(h)} ! "
    desc = (f"{source_desc(args.source, args.num_buffers)} ! videoconvert ! {size}tee name=t "
            f"t. ! queue ! videoconvert ! videorate ! video/x-raw,framerate={args.fps}/1 "
            f'! conyframeembed model="{args.cnn}" output={cnn_output(args.classifier)} '
            + ("" if args.classifier == "none" else
               f'! conytransformer name=classifier model="{args.classifier}" ')
            + "! fakesink sync=false async=false "
            f"t. ! queue ! {draw}{sink}")
    pipe = parse_launch(desc, "overlay.py")
    limit = pipe.get_by_name("limit")
    if limit is not None:
        limit_frames(limit.get_static_pad("src"), args.num_buffers)
    overlay = pipe.get_by_name("overlay")
    loop = GLib.MainLoop()
    status = {"rc": 0, "steps": 0, "text": "..."}
    comp = pipe.get_by_name("comp")
    if comp is not None:
        gi.require_version("GstVideo", "1.0")
        from gi.repository import GstVideo
        cache = {}

        def draw(element, sample):
            text = status["text"]
            # the text wrapped to the frame, 8 pixels from either edge
            frame_w = sample.get_caps().get_structure(0).get_int("width")[1]
            if (text, frame_w) not in cache:
                img = render_text(text, max_width=frame_w - 16)
                h, w = img.shape[:2]
                buf = Gst.Buffer.new_wrapped(img.tobytes())
                GstVideo.buffer_add_video_meta(buf, GstVideo.VideoFrameFlags.NONE,
                                               GstVideo.VideoFormat.BGRA, w, h)
                rect = GstVideo.VideoOverlayRectangle.new_raw(
                    buf, 8, 8, w, h, GstVideo.VideoOverlayFormatFlags.PREMULTIPLIED_ALPHA)
                cache.clear()
                cache[text, frame_w] = GstVideo.VideoOverlayComposition.new(rect)
            return cache[text, frame_w]

        comp.connect("draw", draw)

    def on_message(bus, msg):
        if msg.type == Gst.MessageType.ELEMENT:
            s = msg.get_structure()
            # conytransformer's steps, or with --classifier none conyframeembed's frames
            if (s is not None and s.get_name() in ("conytransformer", "conyframeembed")
                    and s.has_field("label")):
                label = s.get_string("label")
                conf = s.get_value("score")
                _, ts = s.get_uint64("stream_end")   # the end of the input covered
                text = overlay_text(label, conf)
                if overlay is not None:
                    overlay.set_property("text", text)
                status["text"] = text
                status["steps"] += 1
                if not args.quiet:
                    try:
                        print(f"{seconds(ts):>9} s  {label:<24} {conf:.3f}", flush=True)
                    except BrokenPipeError:   # the reader went away (| head): stop printing
                        args.quiet = True
                        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        elif msg.type == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            print(f"overlay.py: error: {err.message} ({dbg})", file=sys.stderr)
            status["rc"] = 1
            loop.quit()
        elif msg.type == Gst.MessageType.EOS:
            loop.quit()

    bus = pipe.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT,
                         lambda: pipe.send_event(Gst.Event.new_eos()) or True)
    if pipe.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        print("overlay.py: the pipeline does not start", file=sys.stderr)
        return 1
    loop.run()
    pipe.set_state(Gst.State.NULL)
    if status["rc"] == 0 and status["steps"] == 0:
        print("overlay.py: no classification message arrived", file=sys.stderr)
        return 1
    return status["rc"]


if __name__ == "__main__":
    sys.exit(main())
