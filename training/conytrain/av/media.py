"""The fused model's raw material: 8 s sound clips (16 kHz mono float32) and camera shots
(224x224 RGB frames at the fused step rate) made from the files of sources.collect().

Sounds are decoded by GStreamer (decodebin, to 16 kHz mono), cut where they are active,
looped to CLIP_S seconds (steady noises with a crossfade, calls and utterances with short
gaps) and set to a random level of their class, as training/data's audio data set does.
"quiet" clips are the noise recordings 60 to 90 dB down and synthesised room floors.

A shot is conytrain.video.camera's virtual camera over one photograph (pan, zoom,
exposure drift, blur, occluders, sensor noise), one frame per fused step (4 per second:
conyfuse gives step s the newest camera frame at or before s / 4 s, so only those frames
matter); the camera moves per step as camera.py moves it per frame, so pans are 2.5 times
slower per second than the video tagger's 10 fps sequences (rendering every 10 fps frame
would cost 2.5 times as much for frames no step sees). A stamp (a cutout with a transparent background) is first
composited on a quiet photograph of its split or on a flat or graded colour.
"""

import os
import subprocess
import tempfile

import numpy as np

from conytrain.audio import yamnet_armnn
from conytrain.video import camera

RATE = 16000
CLIP_S = 8.0
STEP_HZ = 4                        # fused steps per second
FPS = 10                           # camera frames per second in the pipelines
SHOT_STEPS = 16                    # steps per shot (4 s)
PHOTO_W, PHOTO_H = 640, 480

# RMS level ranges (dBFS) per class, those of training/data's audio data set.
LEVELS = {"talking": (-32, -14), "music": (-30, -12), "noise": (-40, -14),
          "animal": (-32, -14), "quiet": (-90, -60)}


# ----------------------------------------------------------------------------- sound
def decode(path):
    """A sound file as float32 mono at 16 kHz (GStreamer's decodebin)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "a.raw")
        subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!",
                        "decodebin", "!", "audioconvert", "!", "audioresample", "!",
                        f"audio/x-raw,format=F32LE,rate={RATE},channels=1", "!",
                        "filesink", f"location={raw}"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return np.fromfile(raw, np.float32)


def rms_db(x):
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64)) + 1e-20)


def trim(x, floor_db=-45.0):
    """x without its silent start and end (50 ms frames below floor_db dBFS RMS and 25 dB
    under the loudest frame)."""
    n = 800
    k = len(x) // n
    if k < 2:
        return x
    e = 10 * np.log10(np.mean(np.square(x[:k * n].reshape(k, n)), axis=1) + 1e-20)
    on = np.nonzero((e > floor_db) & (e > e.max() - 25))[0]
    return x[on[0] * n:(on[-1] + 1) * n] if len(on) else x[:0]


def loop_crossfade(x, n, rng, fade=0.05):
    """x repeated to n samples, each join crossfaded over `fade` seconds, from a random
    start (steady noises)."""
    f = min(int(fade * RATE), len(x) // 4)
    out = np.zeros(0, np.float32)
    start = int(rng.integers(0, max(1, len(x) - f)))
    piece = x[start:]
    while len(out) < n:
        if len(out) and f:
            ramp = np.linspace(0, 1, f, dtype=np.float32)
            out[-f:] = out[-f:] * (1 - ramp) + piece[:f] * ramp
            piece = piece[f:]
        out = np.concatenate([out, piece])
        piece = x
    return out[:n]


def repeat_gaps(parts, n, rng, gap=(0.05, 0.4)):
    """Sounds from `parts` (a list of arrays) one after another with random gaps and ±3 dB
    per repetition, to n samples (calls, utterances)."""
    out = [np.zeros(int(rng.uniform(0, 0.3) * RATE), np.float32)]
    total = len(out[0])
    while total < n:
        p = parts[int(rng.integers(len(parts)))] * 10 ** (rng.uniform(-3, 3) / 20)
        g = np.zeros(int(rng.uniform(*gap) * RATE), np.float32)
        out += [p.astype(np.float32), g]
        total += len(p) + len(g)
    return np.concatenate(out)[:n]


def set_level(x, cls, rng):
    """x at a random RMS level of its class, peaks limited to 0.98."""
    lo, hi = LEVELS[cls]
    y = x * 10 ** ((rng.uniform(lo, hi) - rms_db(x)) / 20)
    peak = np.max(np.abs(y))
    return (y * (0.98 / peak) if peak > 0.98 else y).astype(np.float32)


def clips_of(item, x, rng, n_long=3):
    """Clips (CLIP_S s each, before levelling) of one decoded recording: up to n_long
    windows of a long one (music), else the sound looped."""
    n = int(CLIP_S * RATE)
    x = trim(x)
    if len(x) < RATE // 10:
        return []
    if len(x) >= 2 * n:
        starts = rng.choice(len(x) - n, size=min(n_long, len(x) // n), replace=False)
        return [x[s:s + n] for s in sorted(starts)]
    if item["cls"] == "animal":
        return [repeat_gaps([x], n, rng)]
    return [loop_crossfade(x, n, rng)]


def speech_clips(utterances, count, rng):
    """count clips, each 5 to 7 utterances (trimmed arrays) of one language joined with
    0.08 to 0.35 s gaps and repeated to CLIP_S s."""
    n = int(CLIP_S * RATE)
    out = []
    for _ in range(count):
        pick = rng.choice(len(utterances), size=min(len(utterances), int(rng.integers(5, 8))),
                          replace=False)
        out.append(repeat_gaps([utterances[i] for i in pick], n, rng, gap=(0.08, 0.35)))
    return out


def synth_floor(rng):
    """A synthesised quiet room: dither, a noise floor, or mains hum with a floor."""
    n = int(CLIP_S * RATE)
    kind = int(rng.integers(3))
    noise = rng.normal(0, 1, n).astype(np.float32)
    if kind == 1:                                    # brownish floor
        noise = np.cumsum(noise)
        noise -= np.convolve(noise, np.ones(801) / 801, mode="same")
    if kind == 2:
        t = np.arange(n) / RATE
        hum = np.sin(2 * np.pi * rng.choice([50.0, 60.0]) * t)
        noise = hum + 0.3 * noise / np.std(noise)
    return noise.astype(np.float32)


write_wav = yamnet_armnn.write_wav     # (path, x): 16 kHz mono PCM16


# ----------------------------------------------------------------------------- pictures
def load_picture(path, kind):
    """A photograph as float32 (PHOTO_H, PHOTO_W, 3), cropped to 4:3; a cutout as float32
    RGBA with its longer side PHOTO_H."""
    from PIL import Image
    im = Image.open(path)
    if kind == "cutout":
        im = im.convert("RGBA")
        s = PHOTO_H / max(im.size)
        im = im.resize((max(1, round(im.size[0] * s)), max(1, round(im.size[1] * s))),
                       Image.BILINEAR)
        return np.asarray(im, np.float32)
    im = im.convert("RGB")
    w, h = im.size
    if w * 3 > h * 4:
        c = (w - h * 4 // 3) // 2
        im = im.crop((c, 0, c + h * 4 // 3, h))
    else:
        c = (h - w * 3 // 4) // 2
        im = im.crop((0, c, w, c + w * 3 // 4))
    return np.asarray(im.resize((PHOTO_W, PHOTO_H), Image.BILINEAR), np.float32)


def background(quiet, rng):
    """A 4:3 backdrop: a random quiet photograph (of the same split) or a flat or graded
    colour."""
    if quiet and rng.random() < 0.6:
        return quiet[int(rng.integers(len(quiet)))].copy()
    a, b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    g = np.linspace(0, 1, PHOTO_H if rng.random() < 0.5 else PHOTO_W, dtype=np.float32)
    if rng.random() < 0.4:
        b = a
    ramp = a + (b - a) * g[:, None]
    img = (ramp[:, None, :] * np.ones((1, PHOTO_W, 1), np.float32) if len(g) == PHOTO_H
           else ramp[None, :, :] * np.ones((PHOTO_H, 1, 1), np.float32))
    return img.astype(np.float32)


def composite(cutout, back, rng):
    """cutout (RGBA) at 45 to 90 % of the height on back (H, W, 3), its centre in the
    middle 40 % of the picture (so that the camera's crop mostly keeps it)."""
    s = rng.uniform(0.45, 0.9) * PHOTO_H / max(cutout.shape[:2])
    h, w = max(1, int(cutout.shape[0] * s)), max(1, int(cutout.shape[1] * s))
    ys = (np.arange(h) / s).astype(np.int64).clip(0, cutout.shape[0] - 1)
    xs = (np.arange(w) / s).astype(np.int64).clip(0, cutout.shape[1] - 1)
    c = cutout[ys][:, xs]
    w, h = min(w, PHOTO_W), min(h, PHOTO_H)
    c = c[:h, :w]
    y0 = int(np.clip(PHOTO_H * rng.uniform(0.3, 0.7) - h / 2, 0, PHOTO_H - h))
    x0 = int(np.clip(PHOTO_W * rng.uniform(0.3, 0.7) - w / 2, 0, PHOTO_W - w))
    out = back.copy()
    a = c[..., 3:4] / 255.0
    out[y0:y0 + h, x0:x0 + w] = c[..., :3] * a + out[y0:y0 + h, x0:x0 + w] * (1 - a)
    return out


def shot(picture, kind, quiet, rng):
    """One camera shot over a picture: (SHOT_STEPS, 224, 224, 3) uint8 at the step rate."""
    img = composite(picture, background(quiet, rng), rng) if kind == "cutout" else picture
    other = quiet[int(rng.integers(len(quiet)))] if quiet else img
    return camera.shot(img, other, SHOT_STEPS, rng)
