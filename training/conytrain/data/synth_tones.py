#!/usr/bin/python3
"""Steady tones and mains hum at audible levels, labelled `noise`: a small clip set beside
the main data set (same manifest columns, training/data/README.md).

    /usr/bin/python3 training/synth_tones.py OUT [--train 400] [--test 60] [--seed 26]

Why: "silence" is a level (below about -58 dBFS RMS), but a steady sine or a hum has no
onsets and little texture, and the models before YAMNet called both silence. The data sets
hold mains hum only at silence levels (synth_silence) and tones only as alarms (beeps with
gaps, sirens), so nothing taught a model that a continuous audible tone is a sound. They
are labelled `noise`, the class of steady machine sounds (a hum is one, a test tone is
its cleanest case); an alarm is a signal that starts and stops, which these never do.

Kinds (half each):
  sine  1 to 3 steady sines, 100 Hz to 6 kHz (log-uniform), random amplitudes
  hum   50 or 60 Hz mains hum: the fundamental and 2 to 15 harmonics (amplitudes falling
        as 1/k^a, a in 0.3..1.5, the even ones sometimes stronger, as a transformer's
        100/120 Hz buzz), the fundamental itself below the front end's 125 Hz
Each at -42 to -12 dBFS RMS, half of them over a faint noise floor 35 to 60 dB down.
Every clip is its own group (synthesised); test clips use other seeds than train clips.
Writes OUT/clips/{train,test}/noise/noise_<kind>_NNNN.wav (16 kHz mono PCM16),
OUT/manifest.csv and OUT/labels.txt.
"""
import argparse
import csv
import os
import wave

import numpy as np

from conytrain.data.build import CLASSES, SR, colored_noise, rms

FIELDS = ["path", "label", "source_file", "split", "duration", "origin", "package", "group",
          "family", "detail", "set"]


def sines(rng, t):
    k = int(rng.integers(1, 4))
    f = np.exp(rng.uniform(np.log(100.0), np.log(6000.0), k))
    amp = rng.uniform(0.3, 1.0, k)
    y = sum(a * np.sin(2 * np.pi * fi * t + rng.uniform(0, 2 * np.pi)) for a, fi in zip(amp, f))
    return y, "sines " + "+".join("%.0f" % fi for fi in f) + " Hz"


def hum(rng, t):
    f0 = float(rng.choice([50.0, 60.0]))
    K = int(rng.integers(3, 17))
    a = float(rng.uniform(0.3, 1.5))
    even = float(rng.choice([1.0, 1.0, 3.0]))       # a transformer's buzz: 2 f0 strongest
    y = np.zeros_like(t)
    for k in range(1, K + 1):
        g = (even if k % 2 == 0 else 1.0) / k ** a
        y += g * rng.uniform(0.5, 1.0) * np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 2 * np.pi))
    return y, "mains hum %d Hz, %d harmonics, 1/k^%.2f%s" % (
        f0, K - 1, a, ", even x3" if even > 1 else "")


def clip(rng, kind, n):
    t = np.arange(n) / SR
    y, detail = (sines if kind == "sine" else hum)(rng, t)
    level = float(rng.uniform(-42.0, -12.0))
    y = y / rms(y) * 10 ** (level / 20)
    detail += " at %.1f dBFS" % level
    if rng.random() < 0.5:
        floor = float(rng.uniform(35.0, 60.0))
        nz = colored_noise(rng, n, float(rng.uniform(0.0, 2.0)))
        y = y + nz / rms(nz) * 10 ** ((level - floor) / 20)
        detail += ", noise floor -%.0f dB" % floor
    peak = np.abs(y).max()
    if peak > 0.99:
        y *= 0.99 / peak
    return y, detail


def write_wav(path, y):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.round(np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--test", type=int, default=60)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--clip-seconds", type=float, default=5.0)
    a = ap.parse_args()
    n = int(round(a.clip_seconds * SR))
    rows = []
    for split, count in (("train", a.train), ("test", a.test)):
        for i in range(count):
            kind = ("sine", "hum")[i % 2]
            rng = np.random.default_rng([a.seed, 0 if split == "train" else 1, i])
            y, detail = clip(rng, kind, n)
            rel = "clips/%s/noise/noise_%s_%04d.wav" % (split, kind, i)
            write_wav(os.path.join(a.out, rel), y)
            group = "synth:noise:%s:%s%04d" % (kind, split, i)
            rows.append(dict(path=rel, label="noise", source_file="%s (%s)" % (group, detail),
                             split=split, duration="%.3f" % a.clip_seconds, origin="synth",
                             package="synth(numpy)", group=group, family="synth_" + kind,
                             detail=detail, set="base"))
    with open(os.path.join(a.out, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(a.out, "labels.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print("synth_tones: %d train, %d test clips in %s" % (a.train, a.test, a.out))


if __name__ == "__main__":
    main()
