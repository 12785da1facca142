"""Camera-like frame sequences over still photographs (the continual video tagger's data,
models/video/MODEL.md).

A sequence is a run of shots joined by hard cuts; a shot is one photograph seen through a
virtual camera: a square crop window that pans (constant velocity plus a little shake),
zooms in or out, drifts in exposure (gain and gamma), smears with motion blur when it
moves fast, and is crossed now and then by an occluder (a flat-coloured block or a patch
of another photograph) sliding through the picture. Frames are 224x224 RGB uint8 (the
MobileNet's input size, so the element chain uses them as they are), 10 per second.
Everything is seeded numpy: the same photographs and seed give the same frames.
"""

import numpy as np

SIZE = 224


def sample(img, cx, cy, half, size=SIZE):
    """The square window of half-width `half` (source pixels) centred at (cx, cy) of img
    (H, W, 3) float32, resampled bilinearly to size x size (edges clamped)."""
    H, W, _ = img.shape
    g = (np.arange(size) + 0.5) / size * 2 - 1
    ys = np.clip(cy + g * half - 0.5, 0, H - 1.001)
    xs = np.clip(cx + g * half - 0.5, 0, W - 1.001)
    y0, x0 = ys.astype(np.int64), xs.astype(np.int64)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    a = img[y0][:, x0]
    b = img[y0][:, x0 + 1]
    c = img[y0 + 1][:, x0]
    d = img[y0 + 1][:, x0 + 1]
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def shot(img, other, n, rng):
    """n frames (n, SIZE, SIZE, 3) uint8 of one shot over img (another photograph `other`
    may serve as an occluder); the shot's parameters are drawn from rng."""
    H, W, _ = img.shape
    short = min(H, W)
    half0 = short / 2 * rng.uniform(0.45, 1.0)
    zoom = np.exp(rng.uniform(-0.025, 0.025)) if rng.random() < 0.5 else 1.0
    speed = rng.choice([0.0, 1.0, 3.0, 8.0], p=[0.25, 0.35, 0.25, 0.15])
    ang = rng.uniform(0, 2 * np.pi)
    v = speed * np.array([np.cos(ang), np.sin(ang)])
    shake = rng.uniform(0, 2.0)
    cx, cy = W / 2 + rng.uniform(-0.2, 0.2) * W, H / 2 + rng.uniform(-0.2, 0.2) * H
    gain0, gain1 = np.exp(rng.uniform(-0.6, 0.4, size=2))
    gamma = np.exp(rng.uniform(-0.25, 0.25))
    noise = rng.uniform(0, 6.0)
    occ = None
    if rng.random() < 0.3:                            # an occluder slides across
        ow = rng.uniform(0.3, 0.7) * SIZE
        t_in = rng.integers(0, max(1, n // 2))
        occ = dict(w=ow, t0=t_in, v=rng.uniform(8, 25) * rng.choice([-1, 1]),
                   y=rng.uniform(0, SIZE - ow),
                   colour=rng.uniform(0, 255, size=3) if rng.random() < 0.5 else None)
    frames = np.empty((n, SIZE, SIZE, 3), np.uint8)
    half = half0
    for t in range(n):
        half = float(np.clip(half * zoom, short * 0.12, short / 2))
        cx = float(np.clip(cx + v[0], half, W - half)) if W > 2 * half else W / 2
        cy = float(np.clip(cy + v[1], half, H - half)) if H > 2 * half else H / 2
        jx, jy = rng.normal(0, shake, size=2)
        blur = int(min(5, speed // 2 + (1 if shake > 1.5 else 0)))
        if blur > 0:                                  # motion blur along the pan
            steps = np.linspace(-0.5, 0.5, blur + 1)
            f = np.mean([sample(img, cx + jx + s * v[0] * 2, cy + jy + s * v[1] * 2, half)
                         for s in steps], axis=0)
        else:
            f = sample(img, cx + jx, cy + jy, half)
        gain = gain0 + (gain1 - gain0) * t / max(1, n - 1)
        f = 255.0 * np.clip(f / 255.0 * gain, 0, 1) ** gamma
        if occ is not None:
            x = (t - occ["t0"]) * occ["v"] + (-occ["w"] if occ["v"] > 0 else SIZE)
            if t >= occ["t0"] and -occ["w"] < x < SIZE:
                x0, x1 = int(max(0, x)), int(min(SIZE, x + occ["w"]))
                y0, y1 = int(occ["y"]), int(occ["y"] + occ["w"])
                if occ["colour"] is not None:
                    f[y0:y1, x0:x1] = occ["colour"]
                else:
                    patch = sample(other, other.shape[1] / 2, other.shape[0] / 2,
                                   min(other.shape[:2]) / 4, SIZE)
                    f[y0:y1, x0:x1] = patch[y0:y1, x0:x1]
        f += rng.normal(0, noise, size=f.shape)
        frames[t] = np.clip(np.round(f), 0, 255).astype(np.uint8)
    return frames


def sequence(photos, n_frames, rng, shot_frames=(15, 60)):
    """A sequence of about n_frames frames of shots over `photos` (a list of (name, img)),
    consecutive shots on different photographs. Returns frames (T, SIZE, SIZE, 3) uint8
    and the shots: [(start, length, photo name)]."""
    out, shots, t, prev = [], [], 0, None
    while t < n_frames:
        i = int(rng.integers(len(photos)))
        if i == prev and len(photos) > 1:
            continue
        n = int(min(rng.integers(shot_frames[0], shot_frames[1] + 1), n_frames - t))
        j = int(rng.integers(len(photos)))
        out.append(shot(photos[i][1], photos[j][1], n, rng))
        shots.append((t, n, photos[i][0]))
        t, prev = t + n, i
    return np.concatenate(out), shots
