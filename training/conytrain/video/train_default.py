#!/usr/bin/python3
"""Trains the default video model (models/video/): a small frame CNN and the continual
encoder-classifier on top of it, end to end, on the synthetic clips of video_clips.py.

    /usr/bin/python3 training/train_default_video.py -o models/video [--steps 4000]

Writes
    OUT/frame_cnn.safetensors    the CNN for conyframeembed (libcony cnn.h layout:
                                 features.K / embeddings.K, __metadata__ with input size,
                                 per-channel mean/std of the 0..1 pixel values)
    OUT/classifier.safetensors   the encoder-classifier for conytransformer
                                 (docs/model-format.md; config.frontend names the CNN)
    OUT/train_log.txt            the log below

Model: 32x32 RGB -> conv 8, pool, conv 16, pool, conv 32, pool -> 4x4x32 flattened
(NHWC, so the position of things in the frame is kept) -> FC 64 + ReLU -> FC 32 =
one token per frame; then 1 block, d = 32, 4 heads, window n = 8 tokens, attention `cony`
with m = 4 continual landmarks (trained as windowed Nystrom, docs/attention.md) and the
iterative pseudo-inverse: with the exact (SVD) one the Nystrom model did not learn this task
at all in our runs (train accuracy stuck at 0.40 after 1400 batches, i.e. only `noise`),
presumably through the SVD's gradient when the landmark kernel is nearly singular (frames of
a clip look alike). --attention continual trains exact softmax attention instead. Training
windows are
n consecutive frames of a clip at a random stream offset, or (15 % of the batches) a
warm-up window of the first w < n frames at offset 0; cross-entropy on the newest frame.

--patches G (multi-token steps, the CoNy paper's IV-C: the patches of one frame): the
32x32 frame is a G x G grid of (32/G)x(32/G) tiles, the CNN (the same layer widths) embeds
each tile into a token, the k = G^2 tokens of a frame enter the window together
(tokens_per_step = k, window = --window frames = k x --window tokens) and the model gives
one result per frame (docs/model-format.md). The pipeline is then
`conyframeembed patches-x=G patches-y=G` (eval_video.py reads G from the classifier's
frontend config). G = 1 (default) is the model above, unchanged.

The held-out figures printed at the end come from conytrain.ref's stream_logits, the Python
statement of the continual (stepped) path; training/eval_video.py measures the same
through GStreamer and libcony (conyframeembed + cony classify).
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from conytrain import safetensors_io
from conytrain.export import export_model
from conytrain.ref.model import ConyEncoderClassifier
from conytrain.video import clips as video_clips

SIZE = 32
FPS = 10


class FrameCnn(nn.Module):
    """torchvggish-style naming so libcony loads the state_dict as it is."""

    def __init__(self, mean, std, widths=(8, 16, 32), fc=(64, 32), size=SIZE):
        super().__init__()
        self.size = size
        layers, c = [], 3
        for w in widths:
            layers += [nn.Conv2d(c, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            c = w
        self.features = nn.Sequential(*layers)
        side = size // 2 ** len(widths)
        emb, n = [], side * side * c
        for i, f in enumerate(fc):
            emb.append(nn.Linear(n, f))
            if i + 1 < len(fc):
                emb.append(nn.ReLU())
            n = f
        self.embeddings = nn.Sequential(*emb)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1))

    def forward(self, frames):
        """frames (N, H, W, 3) uint8 -> tokens (N, D)."""
        x = frames.permute(0, 3, 1, 2).float() / 255.0
        x = (x - self.mean) / self.std
        x = self.features(x)
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)   # NHWC flatten, as libcony
        return self.embeddings(x)

    def export(self, path):
        tensors = {k: v.detach().numpy() for k, v in self.state_dict().items()
                   if k.startswith(("features.", "embeddings."))}
        meta = {"input_height": str(self.size), "input_width": str(self.size), "input_channels": "3",
                "input_mean": ",".join(f"{v:.6f}" for v in self.mean.view(-1).tolist()),
                "input_std": ",".join(f"{v:.6f}" for v in self.std.view(-1).tolist()),
                "global_pool": "none", "final_relu": "false",
                "labels_source": "training/train_default_video.py"}
        safetensors_io.save(path, tensors, meta)


def tiles(frames, g):
    """frames (N, H, W, 3) -> (N g^2, H/g, W/g, 3): each frame's g x g tiles row by row
    from the top left (conyframeembed's patch order)."""
    if g == 1:
        return frames
    N, H, W, C = frames.shape
    t = frames.reshape(N, g, H // g, g, W // g, C).permute(0, 1, 3, 2, 4, 5)
    return t.reshape(N * g * g, H // g, W // g, C)


class VideoModel(nn.Module):
    def __init__(self, cnn, enc, patches=1):
        super().__init__()
        self.cnn, self.enc, self.g = cnn, enc, patches

    def tokens(self, frames):
        """frames (N, H, W, 3) uint8 -> tokens (N g^2, D), a frame's patches together."""
        return self.cnn(tiles(frames, self.g))

    def forward(self, clips, offsets):
        """clips (B, w, H, W, 3) uint8 -> logits of the newest frame (B, classes)."""
        B, w = clips.shape[:2]
        tok = self.tokens(clips.reshape(B * w, *clips.shape[2:])).view(B, w * self.g ** 2, -1)
        return self.enc(tok, offsets)


def sample(clips, labels, n, T, batch, rng, warm, k=1):
    """n: window in frames; k tokens per frame: stream offsets (in tokens) are multiples of
    k, so every patch keeps its positional residue."""
    idx = rng.integers(0, len(clips), batch)
    if warm:
        w = int(rng.integers(1, n))
        x = clips[idx, :w]
        off = np.zeros(batch, np.int64)
    else:
        start = rng.integers(0, clips.shape[1] - n + 1, batch)
        x = np.stack([clips[i, s:s + n] for i, s in zip(idx, start)])
        off = k * rng.integers(0, T // k, batch)
    return torch.from_numpy(x), torch.from_numpy(off), torch.from_numpy(labels[idx])


@torch.no_grad()
def stream_eval(model, clips, labels, n):
    """Continual-path accuracy: every clip streamed from index 0. Returns (accuracy at the
    last frame, accuracy over all steps with a full window, confusion at the last frame)."""
    model.eval()
    C = len(video_clips.CLASSES)
    conf = np.zeros((C, C), np.int64)
    full_ok = full_n = 0
    for clip, y in zip(clips, labels):
        tok = model.tokens(torch.from_numpy(clip))
        pred = model.enc.stream_logits(tok).argmax(1).numpy()
        conf[y, pred[-1]] += 1
        full_ok += int((pred[n - 1:] == y).sum())
        full_n += len(pred) - n + 1
    return np.trace(conf) / conf.sum(), full_ok / full_n, conf


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True, help="output directory")
    ap.add_argument("--train-per-class", type=int, default=320)
    ap.add_argument("--val-per-class", type=int, default=40)
    ap.add_argument("--train-frames", type=int, default=24)
    ap.add_argument("--val-frames", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--window", type=int, default=8, help="frames")
    ap.add_argument("--patches", type=int, default=1,
                    help="G: G x G patch tokens per frame (tokens_per_step G^2)")
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--attention", default="cony")
    ap.add_argument("--positional", default="learned", choices=("learned", "cyclic"))
    ap.add_argument("--pinv", default="iterative", choices=("exact", "iterative"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    os.makedirs(args.output, exist_ok=True)
    logf = open(os.path.join(args.output, "train_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    t0 = time.time()
    xtr, ytr = video_clips.make_set(args.train_per_class, args.train_frames, args.seed)
    # held-out clips: another seed, longer clips
    xva, yva = video_clips.make_set(args.val_per_class, args.val_frames, args.seed + 1000)
    log(f"data: {len(xtr)} training clips x {args.train_frames} frames, {len(xva)} held-out "
        f"clips x {args.val_frames} frames (seeds {args.seed}, {args.seed + 1000}), "
        f"{time.time() - t0:.1f} s")
    pix = xtr[:, ::4].reshape(-1, 3).astype(np.float64) / 255.0
    mean, std = pix.mean(0), pix.std(0)

    n = args.window
    g = args.patches
    if g < 1 or SIZE % (8 * g):
        ap.error(f"--patches {g}: the {SIZE}-pixel frame must split into tiles that three "
                 f"2x2 pools divide")
    k = g * g
    cnn = FrameCnn(mean, std, size=SIZE // g)
    frontend = {"type": "video", "cnn": "frame_cnn.safetensors", "width": SIZE,
                "height": SIZE, "channels": 3, "format": "RGB", "fps": FPS, "every": 1}
    if g > 1:
        frontend.update(patches_x=g, patches_y=g)
    enc = ConyEncoderClassifier(32, 32, 4, 64, 1, n * k, args.landmarks, args.attention,
                                video_clips.CLASSES, positional_encoding=args.positional, pinv=args.pinv,
                                frontend=frontend, dropout=0.0, tokens_per_step=k)
    model = VideoModel(cnn, enc, g)
    T = enc.config["positional_rows"]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps,
                                                pct_start=0.1)
    rng = np.random.default_rng(args.seed)
    loss_sum = ok = tot = 0
    t1 = time.time()
    for step in range(1, args.steps + 1):
        model.train()
        x, off, y = sample(xtr, ytr, n, T, args.batch, rng, rng.uniform() < 0.15, k)
        logits = model(x, off)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        loss_sum += loss.item() * len(y)
        ok += (logits.argmax(1) == y).sum().item()
        tot += len(y)
        if step % 100 == 0 or step == args.steps:
            log(f"step {step}/{args.steps}: loss {loss_sum / tot:.4f} train acc {ok / tot:.3f} "
                f"({time.time() - t1:.0f} s)")
            loss_sum = ok = tot = 0
    train_s = time.time() - t1

    last, full, conf = stream_eval(model, xva, yva, n)
    log(f"held-out, continual path (conyref stream_logits, {args.attention}): "
        f"accuracy at the last frame {last:.4f}, over all full-window steps {full:.4f}")
    log("confusion at the last frame (rows true, columns predicted, order "
        + ", ".join(video_clips.CLASSES) + "):")
    for row in conf:
        log("  " + " ".join(f"{v:4d}" for v in row))

    cnn.export(os.path.join(args.output, "frame_cnn.safetensors"))
    export_model(enc, os.path.join(args.output, "classifier.safetensors"))
    n_cnn = sum(p.numel() for p in cnn.parameters())
    n_enc = sum(p.numel() for p in enc.parameters())
    log(f"parameters: CNN {n_cnn}, encoder-classifier {n_enc}; training {train_s:.0f} s, "
        f"total {time.time() - t0:.0f} s on {torch.get_num_threads()} thread(s)")
    with open(os.path.join(args.output, "train_summary.json"), "w") as f:
        json.dump({"last_frame_accuracy": last, "full_window_accuracy": full,
                   "confusion": conf.tolist(), "classes": video_clips.CLASSES,
                   "train_seconds": train_s, "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
