#!/usr/bin/python3
"""Frames per second of the video path on one core: `conyframeembed ! conytransformer`
(libcony through gst-launch-1.0) next to the same CNN and encoder in PyTorch, in the same run.

    GST_PLUGIN_PATH=build/gst /usr/bin/python3 training/bench_video.py [--model-dir models/video]
        [--frames 3000] [--repeat 3]

C side: `filesrc ! rawvideoparse ! conyframeembed ! conytransformer ! fakesink sync=false`
(OPENBLAS_NUM_THREADS=1, pinned to one CPU with taskset when there is one) minus the same
pipeline without the two elements (file reading and parsing); also conyframeembed alone.
PyTorch side (torch.set_num_threads(1)): per frame, the CNN on that frame, then the
encoder-classifier on the window of the last n tokens (the windowed model: PyTorch has no
stepped form); also the CNN alone. Best of --repeat runs, wall time.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time

import numpy as np
import torch

from conytrain import REPO, safetensors_io
from conytrain.ref.model import ConyEncoderClassifier
from conytrain.video import clips as video_clips
from conytrain.video.train_default import FrameCnn


def gst_seconds(desc, repeat):
    """Best wall time and best CPU time (user + system of the child) of a pipeline."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    cmd = (["taskset", "-c", "0"] if shutil.which("taskset") else []) + \
        ["gst-launch-1.0", "-q"] + desc.split()
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return best, best_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default=os.path.join(REPO, "models", "video"))
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cnn_path = os.path.join(args.model_dir, "frame_cnn.safetensors")
    clf_path = os.path.join(args.model_dir, "classifier.safetensors")

    n_clips = -(-args.frames // (5 * 30))
    clips, _ = video_clips.make_set(n_clips, 30, 77)
    frames = clips.reshape(-1, 32, 32, 3)[:args.frames]
    N = len(frames)
    res = {"frames": N}
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "frames.rgb")
        frames.tofile(raw)
        src = f"filesrc location={raw} ! rawvideoparse format=rgb width=32 height=32 framerate=10/1"
        base, base_cpu = gst_seconds(f"{src} ! fakesink sync=false", args.repeat)
        emb, emb_cpu = gst_seconds(f"{src} ! conyframeembed model={cnn_path} ! fakesink "
                                   "sync=false", args.repeat)
        full, full_cpu = gst_seconds(f"{src} ! conyframeembed model={cnn_path} ! conytransformer "
                           f"model={clf_path} ! fakesink sync=false", args.repeat)
    res["c_cnn_fps"] = N / max(emb - base, 1e-9)
    res["c_full_fps"] = N / max(full - base, 1e-9)
    res["c_overhead_s"] = base
    res["c_cnn_fps_cpu"] = N / max(emb_cpu - base_cpu, 1e-9)
    res["c_full_fps_cpu"] = N / max(full_cpu - base_cpu, 1e-9)

    # PyTorch: the same weights.
    t, meta = safetensors_io.load(cnn_path)
    mean = [float(v) for v in meta["input_mean"].split(",")]
    std = [float(v) for v in meta["input_std"].split(",")]
    cnn = FrameCnn(mean, std)
    cnn.load_state_dict({**{k: torch.from_numpy(v) for k, v in t.items()},
                         "mean": cnn.mean, "std": cnn.std})
    ct, cmeta = safetensors_io.load(clf_path)
    config = json.loads(cmeta["config"])
    enc = ConyEncoderClassifier.from_config(config)
    enc.load_state_dict({k: torch.from_numpy(v) for k, v in ct.items()})
    cnn.eval()
    enc.eval()
    n = config["window"]
    x = torch.from_numpy(frames)
    with torch.no_grad():
        best_cnn = best_full = cpu_cnn = cpu_full = float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.thread_time()
            for i in range(N):
                cnn(x[i:i + 1])
            best_cnn = min(best_cnn, time.perf_counter() - t0)
            cpu_cnn = min(cpu_cnn, time.thread_time() - c0)
            t0, c0 = time.perf_counter(), time.thread_time()
            toks = []
            for i in range(N):
                toks.append(cnn(x[i:i + 1])[0])
                toks = toks[-n:]
                lo = max(0, i - n + 1)
                enc(torch.stack(toks).unsqueeze(0), torch.tensor([lo]))
            best_full = min(best_full, time.perf_counter() - t0)
            cpu_full = min(cpu_full, time.thread_time() - c0)
    res["torch_cnn_fps"] = N / best_cnn
    res["torch_full_fps"] = N / best_full
    res["torch_cnn_fps_cpu"] = N / cpu_cnn
    res["torch_full_fps_cpu"] = N / cpu_full
    print(f"{N} frames 32x32 RGB, one core, best of {args.repeat}; frames/s by wall time "
          f"and by CPU time:")
    rows = [("libcony  conyframeembed", "c_cnn"),
            ("libcony  conyframeembed ! conytransformer", "c_full"),
            ("PyTorch  CNN", "torch_cnn"),
            ("PyTorch  CNN + windowed encoder", "torch_full")]
    for name, key in rows:
        print(f"  {name:<42} {res[key + '_fps']:8.0f} wall {res[key + '_fps_cpu']:8.0f} cpu")
    print(f"  (GStreamer: file reading + parsing, {base:.3f} s, subtracted; "
          f"torch {torch.__version__}, 1 thread)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
