#!/usr/bin/python3
"""Event streams: single alarm and animal events repeated over other classes' sound, a
training-only clip set beside the main data set (same manifest columns,
training/data/README.md; models/audio/EXPERIMENTS.md rule 30, issue 44).

    /usr/bin/python3 training/synth_events.py OUT --sources SOURCES.csv [--per-class 600] [--seed 44]

Why: real alarms and many animal calls are short events repeated with gaps (beeps, ring
cycles, klaxons, barks, bleats), often from cheap speakers and quieter than the scene;
the data set's clips are mostly whole recordings looped with short gaps, in the clear.

SOURCES.csv (columns path, label, group, source_file; path relative to the column root's
folder, given by the column "root") lists the clips it may use: the event classes' clips
(alarm, animal) and the backgrounds (speech, music, noise). train_yamnet_audio.py --events
writes it from the train clips that remain after the validation recordings are held out,
so no event or background comes from a validation or test recording.

Each clip (5 s, 16 kHz mono PCM16):
  event       one event cut from a random source clip of the class by an energy detector
              (20 ms frames; active: within 20 dB of the clip's loudest frame; runs of
              active frames 60 ms to 1.5 s, 30 ms holes closed), else a random 0.15 to
              1.0 s stretch; 5 ms fades
  repetition  from a random start in the first second, every event length + a gap of
              0.05 to 0.8 s (one gap per clip, each repetition +-10 % of it), each at
              +-2 dB: every 0.96 s window hears an event, as in the data set's alarms
  channel     half the clips band-limited (a cheap speaker: high-pass 200 to 800 Hz,
              low-pass 2.5 to 6 kHz), a fifth of them also soft-clipped (tanh drive 2-6)
  background  85 % of the clips over a random clip of speech, music or noise, the events
              0 to 15 dB above it (RMS of the event stream's active samples against the
              background's RMS); the rest in the clear
  level       -34 to -14 dBFS RMS overall, peaks limited to 0.98
The label is the event's class. Every clip's group is its event's source group (so
streams built by the trainer repeat a recording as for the data set's own clips).
Writes OUT/clips/train/<class>/<class>_events_NNNN.wav, OUT/manifest.csv, OUT/labels.txt.
"""
import argparse
import csv
import os
import wave

import numpy as np

from conytrain.data.build import CLASSES, SR, rms
from conytrain.data.synth_tones import FIELDS, write_wav

EVENT_CLASSES = ("alarm", "animal")
BACKGROUNDS = ("speech", "music", "noise")


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != SR or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ValueError(f"{path}: not 16 kHz mono PCM16")
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32768.0


def active_runs(x, frame=320, hop=160, below_db=20.0, hole=3):
    """(start, end) samples of the runs of frames within below_db of the loudest frame,
    holes of up to `hole` frames closed."""
    n = 1 + max(0, (len(x) - frame) // hop)
    e = np.array([np.mean(x[i * hop:i * hop + frame] ** 2) for i in range(n)]) + 1e-12
    db = 10 * np.log10(e)
    on = db > db.max() - below_db
    runs, start, off = [], None, 0
    for i, a in enumerate(on):
        if a:
            if start is None:
                start = i
            off = 0
        elif start is not None:
            off += 1
            if off > hole:
                runs.append((start * hop, (i - off + 1) * hop + frame))
                start, off = None, 0
    if start is not None:
        runs.append((start * hop, min(len(x), (n - off) * hop + frame)))
    return runs


def cut_event(x, rng):
    """One event of clip x (module docstring) and how it was found."""
    runs = [(a, b) for a, b in active_runs(x) if 0.06 * SR <= b - a <= 1.5 * SR]
    if runs:
        a, b = runs[int(rng.integers(len(runs)))]
        how = "detected"
    else:
        d = int(rng.uniform(0.15, 1.0) * SR)
        a = int(rng.integers(0, len(x) - d))
        b, how = a + d, "stretch"
    ev = x[a:b].copy()
    fade = min(80, len(ev) // 4)
    ramp = np.linspace(0.0, 1.0, fade)
    ev[:fade] *= ramp
    ev[len(ev) - fade:] *= ramp[::-1]
    return ev, "%s %.2f-%.2f s" % (how, a / SR, b / SR)


def repeat(ev, n, rng):
    """ev repeated from a random start every len(ev) + gap samples, each +-2 dB; the
    stream and a note of the gap."""
    y = np.zeros(n)
    gap = rng.uniform(0.05, 0.8)
    at = int(rng.uniform(0.0, 1.0) * SR)
    while at < n:
        k = min(len(ev), n - at)
        y[at:at + k] += ev[:k] * 10 ** (rng.uniform(-2.0, 2.0) / 20)
        at += len(ev) + int(gap * rng.uniform(0.9, 1.1) * SR)
    return y, "gap %.2f s" % gap


def band_limit(y, lo, hi):
    """y through a brick-wall band-pass lo..hi Hz with 1/3-octave cosine edges (FFT)."""
    f = np.fft.rfftfreq(len(y), 1.0 / SR)
    g = np.clip((np.log2(np.maximum(f, 1.0) / lo) + 1 / 3) * 3, 0, 1) * \
        np.clip((np.log2(hi / np.maximum(f, 1.0)) + 1 / 3) * 3, 0, 1)
    g = 0.5 - 0.5 * np.cos(np.pi * g)
    return np.fft.irfft(np.fft.rfft(y) * g, len(y))


def channel(y, rng):
    notes = []
    if rng.random() < 0.5:
        lo, hi = rng.uniform(200, 800), rng.uniform(2500, 6000)
        y = band_limit(y, lo, hi)
        notes.append("band %.0f-%.0f Hz" % (lo, hi))
        if rng.random() < 0.2:
            drive = rng.uniform(2.0, 6.0)
            y = np.tanh(drive * y / max(np.abs(y).max(), 1e-9)) / np.tanh(drive)
            notes.append("clipped x%.1f" % drive)
    return y, notes


def clip(label, sources, rng, n):
    """One event-stream clip of class label: (samples, source_file, group, detail)."""
    src = sources[label][int(rng.integers(len(sources[label])))]
    ev, how = cut_event(read_wav(src["file"]), rng)
    y, gap = repeat(ev, n, rng)
    y, notes = channel(y, rng)
    active = np.abs(y) > 1e-4
    notes = [how, gap] + notes
    source = src["source_file"]
    if rng.random() < 0.85:
        kind = BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
        bg = sources[kind][int(rng.integers(len(sources[kind])))]
        b = read_wav(bg["file"])[:n]
        b = np.pad(b, (0, n - len(b)))
        snr = rng.uniform(0.0, 15.0)
        ev_rms = rms(y[active]) if active.any() else rms(y)
        y = y + b / max(rms(b), 1e-9) * ev_rms * 10 ** (-snr / 20)
        notes.append("over %s at %.1f dB SNR" % (kind, snr))
        source += ";" + bg["source_file"]
    level = rng.uniform(-34.0, -14.0)
    y = y / max(rms(y), 1e-9) * 10 ** (level / 20)
    peak = np.abs(y).max()
    if peak > 0.98:
        y *= 0.98 / peak
    notes.append("%.1f dBFS" % level)
    return y, source, src["group"], ", ".join(notes)


def read_sources(path):
    """label -> [{file, group, source_file}] of SOURCES.csv; every class the clips need
    must be there."""
    by = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            by.setdefault(r["label"], []).append(
                {"file": os.path.join(r["root"], r["path"]), "group": r["group"],
                 "source_file": r["source_file"]})
    missing = [c for c in EVENT_CLASSES + BACKGROUNDS if not by.get(c)]
    if missing:
        raise ValueError(f"{path}: no source clips of class(es) {', '.join(missing)}")
    return by


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--sources", required=True, help="CSV: root, path, label, group, source_file")
    ap.add_argument("--per-class", type=int, default=600)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--clip-seconds", type=float, default=5.0)
    a = ap.parse_args(argv)
    if a.per_class < 1:
        ap.error("--per-class: at least 1")
    sources = read_sources(a.sources)
    n = int(round(a.clip_seconds * SR))
    rows = []
    for ci, label in enumerate(EVENT_CLASSES):
        for i in range(a.per_class):
            rng = np.random.default_rng([a.seed, ci, i])
            y, source, group, detail = clip(label, sources, rng, n)
            rel = "clips/train/%s/%s_events_%04d.wav" % (label, label, i)
            write_wav(os.path.join(a.out, rel), y)
            rows.append(dict(path=rel, label=label, source_file=source, split="train",
                             duration="%.3f" % a.clip_seconds, origin="mix",
                             package="events(numpy)", group="events:" + group,
                             family="events_" + label, detail=detail, set="events"))
    with open(os.path.join(a.out, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(a.out, "labels.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print("event_streams: %d clips a class (%s) in %s" % (a.per_class, ", ".join(EVENT_CLASSES),
                                                           a.out))


if __name__ == "__main__":
    main()
