#!/usr/bin/python3
"""A long stream of real CNN tokens for `cony bench attention --tokens`: a sound scene of
random 2-12 s scenes (espeak-ng speech, a gated alarm, rumble noise, near-silence,
chords), embedded by the shipped default audio CNN (`cony embed`, one token every
0.25 s, 32-d).

Usage: /usr/bin/python3 bench/cnn_token_stream.py CONY SECONDS OUT.npy
(SECONDS = 1100 gives 4397 tokens; needs numpy, espeak-ng for the speech scenes)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

SR = 16000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCES = [
    "The weather today is mild, with a light wind from the west.",
    "Tomorrow brings some rain in the afternoon and a cool evening.",
    "Please remember to close the windows before you leave the house.",
    "The train to the city leaves every twenty minutes from platform two.",
]


def rms_to(x, dbfs):
    return x * (10 ** (dbfs / 20.0) / max(np.sqrt(np.mean(x ** 2)), 1e-12))


def speech(tmp, i, seconds, rng):
    """espeak-ng speech padded or cut to the scene's length (16 kHz)."""
    raw = os.path.join(tmp, f"s{i}.wav")
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", str(int(rng.integers(130, 180))), "-w", raw,
                    SENTENCES[i % len(SENTENCES)]], check=True,
                   env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    with wave.open(raw) as w:
        rate, x = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0
    x = np.interp(np.arange(0, len(x) / rate, 1 / SR), np.arange(len(x)) / rate, x)
    n = int(seconds * SR)
    return np.pad(x, (0, max(0, n - len(x))))[:n]


def scene(kind, seconds, rng, tmp, i):
    t = np.arange(int(seconds * SR)) / SR
    if kind == "speech" and shutil.which("espeak-ng"):
        return rms_to(speech(tmp, i, seconds, rng), -22)
    if kind == "alarm":
        gate = (np.mod(t, 0.5) < 0.25).astype(float)
        return rms_to(np.sin(2 * np.pi * rng.uniform(1500, 3000) * t) * gate, -20)
    if kind == "noise":
        rumble = sum(np.sin(2 * np.pi * 55 * k * t + k) / k for k in range(1, 8))
        return rms_to(rumble + 0.8 * rng.standard_normal(len(t)), -25)
    if kind == "music":
        notes = 220 * 2 ** (rng.integers(0, 12, 3) / 12)
        return rms_to(sum(np.sin(2 * np.pi * f * t) for f in notes) * (1 + 0.3 * np.sin(3 * t)), -22)
    return rms_to(rng.standard_normal(len(t)), -75)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    cony, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(2026)
    parts, total, i = [], 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        while total < seconds:
            length = float(rng.uniform(2, 12))
            kind = rng.choice(["speech", "alarm", "noise", "music", "silence"])
            parts.append(scene(kind, length, rng, tmp, i))
            total += length
            i += 1
        x = np.concatenate(parts)
        wav = os.path.join(tmp, "scene.wav")
        with wave.open(wav, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SR)
            w.writeframes(np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes())
        subprocess.run([cony, "embed", "--model", os.path.join(ROOT, "models", "audio", "vggish.safetensors"),
                        wav, "-o", out], check=True)
    print(f"{out}: {np.load(out).shape} tokens from {total:.0f} s of {i} scenes")


if __name__ == "__main__":
    main()
