#!/usr/bin/python3
"""Labelled synthetic video clips for the default video model (models/video/).

Every clip is a short RGB sequence, H x W (32 x 32 by default), uint8, drawn with numpy
from a seeded generator, so the data set is reproducible bit for bit:

    static        one object (square or disc) standing still on a plain background
    moving-left   the object moves left by 1..3 pixels per frame (wrapping around)
    moving-right  the object moves right by 1..3 pixels per frame
    flashing      the object stands still and is shown / hidden every 1..3 frames
    noise         every frame is fresh random noise (grey "snow" like videotestsrc
                  pattern=snow, or coloured), sometimes blended with a background

Background and object colours are random (with a minimum contrast), object sizes
5..11 pixels, and every frame gets a little Gaussian sensor noise. A single frame
cannot tell static from moving-left/right (nor, for half of the frames, from flashing):
the temporal model has to.

    /usr/bin/python3 training/video_clips.py --label moving-right --frames 30 --seed 7 -o clip.rgb
writes one clip as raw RGB frames (what `rawvideoparse format=rgb width=32 height=32`
reads), used by the pipeline tests.
"""

import argparse

import numpy as np

CLASSES = ["static", "moving-left", "moving-right", "flashing", "noise"]


def _colour_pair(rng):
    while True:
        bg = rng.uniform(0.0, 1.0, 3)
        fg = rng.uniform(0.0, 1.0, 3)
        if np.abs(bg - fg).sum() > 0.6:
            return bg, fg


def _mask(h, w, cy, cx, size, disc):
    """Object mask with its top-left corner at (cy, cx) (may be partly outside)."""
    yy, xx = np.mgrid[0:h, 0:w]
    if disc:
        r = size / 2.0
        return (yy - (cy + r - 0.5)) ** 2 + (xx - (cx + r - 0.5)) ** 2 <= r * r
    return (yy >= cy) & (yy < cy + size) & (xx >= cx) & (xx < cx + size)


def make_clip(label, frames, rng, h=32, w=32):
    """One clip (frames, h, w, 3) uint8 of class `label` (a name from CLASSES)."""
    if label not in CLASSES:
        raise ValueError(f"unknown class {label!r}, expected one of {CLASSES}")
    bg, fg = _colour_pair(rng)
    size = int(rng.integers(5, 12))
    disc = bool(rng.integers(0, 2))
    sigma = rng.uniform(0.005, 0.04)
    cy = int(rng.integers(0, h - size + 1))
    cx = int(rng.integers(0, w - size + 1))
    speed = int(rng.integers(1, 4))
    period = int(rng.integers(1, 4))
    phase = int(rng.integers(0, 2 * period))
    grey = bool(rng.integers(0, 2))
    blend = rng.uniform(0.0, 0.5) if rng.integers(0, 3) == 0 else 0.0
    out = np.empty((frames, h, w, 3), np.float32)
    for t in range(frames):
        img = np.broadcast_to(bg, (h, w, 3)).copy()
        if label == "noise":
            if grey:
                n = rng.uniform(0.0, 1.0, (h, w, 1)).repeat(3, axis=2)
            else:
                n = rng.uniform(0.0, 1.0, (h, w, 3))
            img = blend * img + (1.0 - blend) * n
        else:
            x = cx
            visible = True
            if label in ("moving-left", "moving-right"):
                step = speed * t * (1 if label == "moving-right" else -1)
                # wrap so the object re-enters on the other side
                x = (cx + size + step) % (w + size) - size
            elif label == "flashing":
                visible = ((t + phase) // period) % 2 == 0
            if visible:
                img[_mask(h, w, cy, x, size, disc)] = fg
        img += rng.normal(0.0, sigma, img.shape)
        out[t] = img
    return (np.clip(out, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def make_set(n_per_class, frames, seed, h=32, w=32):
    """(clips (N, frames, h, w, 3) uint8, labels (N,) int64), classes interleaved."""
    rng = np.random.default_rng(seed)
    clips, labels = [], []
    for i in range(n_per_class):
        for c, name in enumerate(CLASSES):
            clips.append(make_clip(name, frames, rng, h, w))
            labels.append(c)
    return np.stack(clips), np.array(labels, dtype=np.int64)


def main():
    ap = argparse.ArgumentParser(description="write one synthetic clip as raw RGB frames")
    ap.add_argument("--label", required=True, choices=CLASSES)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--height", type=int, default=32)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    clip = make_clip(args.label, args.frames, np.random.default_rng(args.seed), args.height,
                     args.width)
    with open(args.output, "wb") as f:
        f.write(clip.tobytes())


if __name__ == "__main__":
    main()
