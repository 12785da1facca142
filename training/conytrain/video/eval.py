#!/usr/bin/python3
"""Held-out accuracy of the default video model in the continual path, through GStreamer:

    appsrc (the held-out clips of video_clips.py, RGB 32x32, 10 fps, a DISCONT at the
    start of every clip) ! conyframeembed ! conytransformer ! fakesink

conyframeembed runs libcony's CNN on every frame, conytransformer steps libcony's
continual encoder one token at a time (the DISCONT resets it, so every clip is streamed
from step 0) and posts one `conytransformer` element message per step; the script maps
the messages back to clips and frames by their timestamps.

    GST_PLUGIN_PATH=build/gst /usr/bin/python3 training/eval_video.py \\
        [--model-dir models/video] [--per-class 40] [--frames 32] [--seed 1001] [--json OUT]

Defaults reproduce the held-out set of train_default_video.py (seed 1 + 1000: 40 clips per
class, 32 frames, never seen in training). Prints the accuracy at the last frame of each
clip, over every step with a full attention window (step >= n - 1), over every step, and
the confusion matrix at the last frame; also the frames per second of the whole pipeline
(including appsrc and message handling, on however many cores the machine lends).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from conytrain import REPO
from conytrain.video import clips as video_clips

FRAME_NS = 100_000_000   # 10 fps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default=os.path.join(REPO, "models", "video"))
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1001)
    ap.add_argument("--attention", help="conytransformer attention override (nick)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--min-accuracy", type=float,
                    help="exit 1 when the last-frame accuracy is below this (for meson test)")
    args = ap.parse_args(argv)

    try:
        import gi
        gi.require_version("Gst", "1.0")
        from gi.repository import Gst
    except (ImportError, ValueError) as e:
        print(f"eval_video.py needs python3-gi with Gst 1.0 ({e}): skipping")
        return 77
    Gst.init(None)

    cnn = os.path.join(args.model_dir, "frame_cnn.safetensors")
    clf = os.path.join(args.model_dir, "classifier.safetensors")
    with open(clf, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        config = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
    labels, window = config["labels"], config["window"]
    # patch models (train_default_video.py --patches G): G x G tiles per frame, k = G^2
    # tokens per step, one message per frame; the window in frames is ceil(n / k)
    fe = config.get("frontend") or {}
    px, py = int(fe.get("patches_x", 1)), int(fe.get("patches_y", 1))
    k = int(config.get("tokens_per_step", 1))
    if px * py != k:
        raise SystemExit(f"{clf}: frontend patches {px}x{py} but tokens_per_step = {k}")
    window = -(-window // k)
    patches = f" patches-x={px} patches-y={py}" if k > 1 else ""
    clips, y = video_clips.make_set(args.per_class, args.frames, args.seed)
    N, L = clips.shape[:2]
    span = L + 8   # frames of timeline per clip (a hole between clips)

    att = f" attention={args.attention}" if args.attention else ""
    pipe = Gst.parse_launch(
        "appsrc name=src format=time max-bytes=0 "
        "caps=video/x-raw,format=RGB,width=32,height=32,framerate=10/1 "
        f"! conyframeembed model=\"{cnn}\"{patches} ! conytransformer model=\"{clf}\"{att} "
        "! fakesink sync=false")
    src = pipe.get_by_name("src")
    bus = pipe.get_bus()
    pred = np.full((N, L), -1, np.int64)
    pipe.set_state(Gst.State.PLAYING)
    t0 = time.time()
    for c in range(N):
        for t in range(L):
            buf = Gst.Buffer.new_wrapped(clips[c, t].tobytes())
            buf.pts = (c * span + t) * FRAME_NS
            buf.duration = FRAME_NS
            if t == 0:
                buf.set_flags(Gst.BufferFlags.DISCONT)
            if src.emit("push-buffer", buf) != Gst.FlowReturn.OK:
                raise SystemExit("appsrc refused a buffer")
    src.emit("end-of-stream")
    while True:
        msg = bus.timed_pop_filtered(60 * Gst.SECOND,
                                     Gst.MessageType.ELEMENT | Gst.MessageType.EOS
                                     | Gst.MessageType.ERROR)
        if msg is None:
            raise SystemExit("timed out waiting for the pipeline")
        if msg.type == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            raise SystemExit(f"pipeline error: {err.message} ({dbg})")
        if msg.type == Gst.MessageType.EOS:
            break
        s = msg.get_structure()
        if s is None or s.get_name() != "conytransformer":
            continue
        ok, ts = s.get_uint64("pts")   # the step's frame (timestamp: its window's start)
        frame = ts // FRAME_NS
        c, t = divmod(frame, span)
        pred[c, t] = s.get_value("class_id")
    wall = time.time() - t0
    pipe.set_state(Gst.State.NULL)

    if (pred < 0).any():
        raise SystemExit(f"{int((pred < 0).sum())} steps got no message")
    C = len(labels)
    conf = np.zeros((C, C), np.int64)
    for c in range(N):
        conf[y[c], pred[c, -1]] += 1
    last = np.trace(conf) / N
    full = float((pred[:, window - 1:] == y[:, None]).mean())
    every = float((pred == y[:, None]).mean())
    print(f"held-out clips: {N} ({args.per_class} per class, {L} frames, seed {args.seed}); "
          f"window = {window} frames" + (f" ({px}x{py} patch tokens per frame)" if k > 1 else ""))
    print(f"accuracy, GStreamer continual path (conyframeembed ! conytransformer"
          f"{att}): last frame {last:.4f}, full-window steps {full:.4f}, all steps {every:.4f}")
    print("confusion at the last frame (rows true, columns predicted): " + ", ".join(labels))
    for row in conf:
        print("  " + " ".join(f"{v:4d}" for v in row))
    print(f"pipeline: {N * L} frames in {wall:.2f} s = {N * L / wall:.0f} frames/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"last_frame_accuracy": last, "full_window_accuracy": full,
                       "all_steps_accuracy": every, "confusion": conf.tolist(),
                       "labels": labels, "frames_per_second": N * L / wall}, f, indent=1)
    if args.min_accuracy is not None and last < args.min_accuracy:
        print(f"FAIL: last-frame accuracy {last:.4f} < {args.min_accuracy}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
