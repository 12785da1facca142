#!/usr/bin/python3
"""Float64 numpy reference of VGGish's log-mel front end, and the golden files
that tests/libcony/test_mel.c checks libcony's float32 implementation against.

Written from ../shared/research/vggish.md (the behaviour of mel_features.py +
vggish_input.py), not copied:

  frames of `window` samples every `hop` samples, no padding (frame t covers
  [t*hop, t*hop + window)); periodic Hann; rfft of length `fft` with the windowed
  samples zero-padded at the end; magnitude; a mel matrix with band edges
  equally spaced in HTK mel (1127 ln(1 + f/700)) between fmin and fmax, triangles
  interpolated in mel at the mel positions of the bins linspace(0, sr/2, fft/2+1),
  peak 1, no normalisation, row 0 (DC) zeroed; natural log(mel + offset).

Usage:  /usr/bin/python3 training/mel_reference.py [--out tests/golden/mel]
Writes <name>_wave.npy (float32 samples) and <name>_logmel.npy (float32 frames x
n_mels) for each test signal, plus mel_matrix.npy ((fft/2+1) x n_mels).
verify() checks committed files against this script (training/tests/test_frontend_golden.py).
"""

import argparse
import os

import numpy as np

from conytrain import REPO
from conytrain.golden import check as golden_check

VGGISH = dict(sample_rate=16000, window=400, hop=160, fft=512, n_mels=64,
              fmin=125.0, fmax=7500.0, log_offset=0.01, periodic=True)


def hz_to_mel(hz):
    return 1127.0 * np.log1p(np.asarray(hz, dtype=np.float64) / 700.0)


def mel_matrix(sample_rate=16000, fft=512, n_mels=64, fmin=125.0, fmax=7500.0):
    """(fft/2+1, n_mels) float64 weights, VGGish style."""
    n_bins = fft // 2 + 1
    nyquist = sample_rate / 2.0
    if not (0.0 <= fmin < fmax <= nyquist):
        raise ValueError(f"need 0 <= fmin < fmax <= {nyquist}")
    bins_mel = hz_to_mel(np.linspace(0.0, nyquist, n_bins))
    edges = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    weights = np.empty((n_bins, n_mels), dtype=np.float64)
    for i in range(n_mels):
        lo, centre, hi = edges[i], edges[i + 1], edges[i + 2]
        rising = (bins_mel - lo) / (centre - lo)
        falling = (hi - bins_mel) / (hi - centre)
        weights[:, i] = np.maximum(0.0, np.minimum(rising, falling))
    weights[0, :] = 0.0
    return weights


def hann(window, periodic=True):
    n = np.arange(window, dtype=np.float64)
    denom = window if periodic else window - 1
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * n / denom)


def frame_signal(x, window, hop):
    x = np.asarray(x, dtype=np.float64)
    if len(x) < window:
        return np.zeros((0, window))
    count = 1 + (len(x) - window) // hop
    idx = np.arange(window)[None, :] + hop * np.arange(count)[:, None]
    return x[idx]


def log_mel(x, sample_rate=16000, window=400, hop=160, fft=512, n_mels=64,
            fmin=125.0, fmax=7500.0, log_offset=0.01, periodic=True):
    """(frames, n_mels) float64 log-mel of the mono signal x."""
    frames = frame_signal(x, window, hop) * hann(window, periodic)[None, :]
    mag = np.abs(np.fft.rfft(frames, n=fft, axis=1))
    mel = mag @ mel_matrix(sample_rate, fft, n_mels, fmin, fmax)
    return np.log(mel + log_offset)


def test_signals(sr=16000):
    """name -> float32 waveform (a few hundred ms each)."""
    rng = np.random.default_rng(20261121)
    t = np.arange(int(0.3 * sr)) / sr
    sig = {}
    # Linear sweep 50 Hz -> 7.9 kHz over 0.5 s.
    ts = np.arange(int(0.5 * sr)) / sr
    f0, f1, dur = 50.0, 7900.0, 0.5
    sig["sweep"] = 0.5 * np.sin(2 * np.pi * (f0 * ts + (f1 - f0) * ts ** 2 / (2 * dur)))
    # Exponential sweep 100 Hz -> 7 kHz over 0.4 s.
    te = np.arange(int(0.4 * sr)) / sr
    k = np.log(7000.0 / 100.0) / 0.4
    sig["expsweep"] = 0.8 * np.sin(2 * np.pi * 100.0 * (np.exp(k * te) - 1) / k)
    sig["tone1k"] = 0.5 * np.sin(2 * np.pi * 1000.0 * t)
    sig["tones"] = (0.3 * np.sin(2 * np.pi * 440.0 * t) + 0.2 * np.sin(2 * np.pi * 3125.0 * t + 1.0)
                    + 0.05 * np.sin(2 * np.pi * 156.25 * t))
    sig["quiet_tone"] = 1e-3 * np.sin(2 * np.pi * 250.0 * t)
    sig["noise"] = rng.standard_normal(len(t)) * 0.2
    sig["loud_noise"] = np.clip(rng.standard_normal(int(0.25 * sr)), -1, 1)
    clicks = np.zeros(int(0.3 * sr))
    clicks[[7, 800, 1601, 2222, 3333, 4000, 4799]] = [1.0, -0.7, 0.5, 1.0, -1.0, 0.25, 0.9]
    sig["clicks"] = clicks
    sig["silence"] = np.zeros(int(0.2 * sr))
    sig["short"] = rng.uniform(-0.5, 0.5, 399)       # less than one window: zero frames
    sig["one_frame"] = rng.uniform(-0.5, 0.5, 559)   # exactly one frame
    return {name: np.asarray(x, dtype=np.float32) for name, x in sig.items()}


# A non-VGGish configuration, to prove every parameter is honoured.
CUSTOM = dict(sample_rate=8000, window=256, hop=100, fft=256, n_mels=40,
              fmin=0.0, fmax=4000.0, log_offset=0.001, periodic=False)


def golden_waves():
    """name -> float32 waveform of every golden: test_signals() and "custom" (CUSTOM)."""
    waves = test_signals()
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(2000) * 0.1 + 0.3 * np.sin(2 * np.pi * 700 * np.arange(2000) / 8000))
    waves["custom"] = x.astype(np.float32)
    return waves


def golden_files(waves):
    """{file name: array as written}: the VGGish mel matrix, and each wave with its
    float64 log-mel stored float32."""
    files = {"mel_matrix.npy": mel_matrix(16000, 512, 64, 125.0, 7500.0).astype(np.float32)}
    for name, x in waves.items():
        config = CUSTOM if name == "custom" else VGGISH
        y = log_mel(x.astype(np.float64), **config)
        files[f"{name}_wave.npy"] = x
        files[f"{name}_logmel.npy"] = y.astype(np.float32).reshape(-1, config["n_mels"])
    return files


def verify(golden):
    """Messages for every way the golden files under `golden` are not what main() writes
    ([] when they are): the waves are golden_waves(), the log-mels are the reference on
    the committed waves."""
    waves = golden_waves()
    files = golden_files({name: golden_check.committed(golden, f"{name}_wave.npy", x)
                          for name, x in waves.items()})
    files.update({f"{name}_wave.npy": x for name, x in waves.items()})
    return golden_check.compare(golden, files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "mel"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    w = mel_matrix(16000, 512, 64, 125.0, 7500.0)
    # Facts from vggish.md, checked here so a wrong reference cannot pass silently.
    assert w.shape == (257, 64)
    nz = np.nonzero(w[:, 0])[0]
    assert list(nz) == [5] and abs(w[5, 0] - 0.948) < 1e-3, (nz, w[5, 0])
    used = np.nonzero(w.any(axis=1))[0]
    assert used[0] == 5 and used[-1] == 239, (used[0], used[-1])
    assert np.allclose(log_mel(np.zeros(1000)), np.log(0.01))

    waves = golden_waves()
    files = golden_files(waves)
    golden_check.write(args.out, files)
    for name, x in waves.items():
        y = files[f"{name}_logmel.npy"]
        if name == "custom":
            print(f"custom       {len(x):6d} samples -> {y.shape[0]:3d} frames "
                  "(8 kHz, 40 mels, symmetric)")
            continue
        print(f"{name:12s} {len(x):6d} samples -> {y.shape[0]:3d} frames, "
              f"range [{y.min() if y.size else 0:.3f}, {y.max() if y.size else 0:.3f}]")


if __name__ == "__main__":
    main()
