#!/usr/bin/python3
"""Independent verification of the converted YAMNet against ArmNN (issue #25).

  /usr/bin/python3 training/verify_yamnet_armnn.py /work/yamnet_src/yamnet_spectra_in.tflite \
      [--spectra /work/yamnet_src/yamnet_test_spectra.bin] [--out tests/golden/yamnet]

Makes the test sounds (espeak-ng speech, a 440 Hz sine, sox pink noise, digital silence,
a sox sawtooth siren, fluidsynth music when fluidsynth and its sound font are installed),
turns each into 96x64 log-mel patches with the project's front end (mel_reference.log_mel
with YAMNet's log offset 0.001, what `conymel preset=yamnet` computes), runs the original
int8 .tflite on ArmNN's CpuRef backend (Debian's python3-pyarmnn), and writes the golden
that tests/ check the converted file and libcony against:

  patches.npy       (N, 96, 64) float32 input patches
  armnn_scores.npy  (N, 521) float32 ArmNN's scores
  patches.json      {"names": [sound of each patch], "expected": {sound: label}}
  music.wav         the fluidsynth music as 16 kHz 16-bit WAV (the pipeline test plays it:
                    CI does not install fluidsynth and its 140 MB sound font)

It then prints, per patch, ArmNN's top-1 and that of the float64 numpy reference of the
converted file (conytrain/ref/mobilenet.py; compare()) and the largest |score difference|. ArmNN takes about a second per patch; the CI tests
(training/tests/test_yamnet_golden.py, tests/models/test_yamnet_model.py) only read the committed
golden. Needs, beyond scripts/setup.sh: apt-get install python3-pyarmnn
libarmnn-cpuref-backend22 libarmnntfliteparser22 (and fluidsynth fluid-soundfont-gm for
the music; without them the music is skipped and the script says so).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

from conytrain import REPO, armnn
from conytrain.audio import mel as mel_reference
from conytrain.ref import mobilenet

ROOT = REPO

SR = 16000
PATCH_FRAMES, PATCH_HOP = 96, 48         # 0.96 s patches every 0.48 s, as upstream YAMNet
PATCHES_PER_SOUND = 3
SECONDS = 2.0                            # 198 frames: patches at frames 0, 48, 96
LOG_OFFSET = 0.001
MODEL = os.path.join(ROOT, "models", "yamnet", "yamnet.safetensors")
GOLDEN = os.path.join(ROOT, "tests", "golden", "yamnet")
TOP1_TOLERANCE = 0.1                     # issue #25: max |score difference| against ArmNN

# sound -> the label the network should give it (a sanity check, not the comparison)
EXPECTED = {"test_spectra": "Speech", "speech": "Speech", "sine440": "Sine wave",
            "pink_noise": "Pink noise", "silence": "Silence", "siren": "Police car (siren)", "music": "Music"}


def _sox_raw(inputs, tmp, effects=()):
    """Samples of what `sox INPUTS OUT EFFECTS` writes, as float64 at 16 kHz mono (-R:
    the same random numbers on every run)."""
    out = os.path.join(tmp, "sox.raw")
    subprocess.run(["sox", "-R"] + list(inputs) + ["-t", "raw", "-r", str(SR), "-c", "1", "-e", "signed",
                   "-b", "16", out] + list(effects), check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    return np.fromfile(out, "<i2").astype(np.float64) / 32768.0


def _fit(x):
    n = int(SECONDS * SR)
    return np.pad(x[:n], (0, max(0, n - len(x))))


def speech(tmp):
    wav = os.path.join(tmp, "speech.wav")
    text = ("The weather today is cloudy with a chance of rain in the afternoon, "
            "so please remember to take an umbrella when you leave the house.")
    # without LD_PRELOAD: espeak-ng hangs under scripts/sanitize.sh's sanitizer runtime
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(["espeak-ng", "-v", "en", "-s", "160", "-w", wav, text], check=True, env=env)
    return _fit(_sox_raw([wav], tmp))


def sine440(tmp):
    t = np.arange(int(SECONDS * SR)) / SR
    return 0.5 * np.sin(2 * np.pi * 440.0 * t)


def pink_noise(tmp):
    return _fit(_sox_raw(["-n"], tmp, ["synth", str(SECONDS), "pinknoise", "vol", "0.1"]))


def silence(tmp):
    return np.zeros(int(SECONDS * SR))


def siren(tmp):
    """A yelping siren: a sawtooth gliding 800 -> 1600 -> 800 Hz every 0.6 s. (Slow wails
    score Siren and Alarm within a few hundredths of each other, too close to compare
    top-1 with an int8 runtime; the yelp is Police car (siren) by 0.3.)"""
    up = _sox_raw(["-n"], tmp, ["synth", "0.3", "sawtooth", "800-1600", "vol", "0.3"])
    down = _sox_raw(["-n"], tmp, ["synth", "0.3", "sawtooth", "1600-800", "vol", "0.3"])
    return _fit(np.concatenate([up, down] * 4))


def music(tmp):
    """A piece composed by training/conytrain/data/synth_music.py (fixed seed), played by fluidsynth."""
    from conytrain.data import synth_music
    if shutil.which("fluidsynth") is None or not os.path.exists(synth_music.SOUNDFONT):
        raise RuntimeError("fluidsynth or " + synth_music.SOUNDFONT + " is not installed")
    rng = np.random.default_rng(25)
    _, tempo, tracks = synth_music.compose(rng, SECONDS + 1.0)
    mid, wav = os.path.join(tmp, "music.mid"), os.path.join(tmp, "music.wav")
    synth_music.write_midi(mid, tempo, tracks)
    subprocess.run(["fluidsynth", "-n", "-i", "-q", "-r", str(SR), "-g", "0.6", "-F", wav,
                    "-T", "wav", "-O", "s16", synth_music.SOUNDFONT, mid], check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return _fit(_sox_raw([wav], tmp)[int(0.5 * SR):])      # skip the first notes' attack


SOUNDS = [("speech", speech), ("sine440", sine440), ("pink_noise", pink_noise),
          ("silence", silence), ("siren", siren), ("music", music)]


def patches_of(x):
    """The first PATCHES_PER_SOUND log-mel patches of x (float32, 96 x 64)."""
    mel = mel_reference.log_mel(x, log_offset=LOG_OFFSET)
    starts = range(0, len(mel) - PATCH_FRAMES + 1, PATCH_HOP)
    return [mel[s:s + PATCH_FRAMES].astype(np.float32) for s in list(starts)[:PATCHES_PER_SOUND]]


def make_patches(spectra_path):
    """(patches (N, 96, 64), names [sound of each patch], skipped {sound: why},
    waves {sound: samples})."""
    patches, names, skipped, waves = [], [], {}, {}
    if spectra_path:
        patches.append(np.fromfile(spectra_path, "<f4").reshape(PATCH_FRAMES, 64))
        names.append("test_spectra")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in SOUNDS:
            try:
                x = make(tmp)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                skipped[name] = str(e)
                continue
            waves[name] = x
            for p in patches_of(x):
                patches.append(p)
                names.append(name)
    return np.stack(patches).astype(np.float32), names, skipped, waves


def write_wav(path, x):
    pcm = np.clip(np.round(np.asarray(x) * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def armnn_scores(tflite, patches):
    """Scores of the .tflite on ArmNN's CpuRef backend, one row per patch."""
    rows = armnn.run_tflite(tflite, [p.reshape(1, PATCH_FRAMES, 64) for p in patches])
    return np.stack(rows).astype(np.float32)


def reference_scores(model_path, patches):
    """Scores of the converted file by the float64 numpy reference (conytrain.ref.mobilenet)."""
    net = mobilenet.load(model_path)
    return np.stack([mobilenet.forward(net, p)[1] for p in patches]), net


def compare(model_path=MODEL, golden=GOLDEN):
    """Per-patch comparison of the converted file (float64) with ArmNN's golden scores.
    Returns a list of dicts: name, armnn_top, ref_top, armnn_score, ref_score, max_diff."""
    patches = np.load(os.path.join(golden, "patches.npy"))
    want = np.load(os.path.join(golden, "armnn_scores.npy")).astype(np.float64)
    with open(os.path.join(golden, "patches.json")) as f:
        names = json.load(f)["names"]
    got, net = reference_scores(model_path, patches)
    labels = net["labels"]
    rows = []
    for name, g, w in zip(names, got, want):
        rows.append(dict(name=name, armnn_top=labels[int(w.argmax())], ref_top=labels[int(g.argmax())],
                         armnn_score=float(w.max()), ref_score=float(g.max()),
                         max_diff=float(np.abs(g - w).max())))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tflite", help="the original yamnet_spectra_in.tflite")
    ap.add_argument("--spectra", help="yamnet_test_spectra.bin (96x64 float32), added first")
    ap.add_argument("--model", default=MODEL, help="the converted .safetensors to compare")
    ap.add_argument("--out", default=GOLDEN, help="golden directory to write")
    args = ap.parse_args(argv)
    patches, names, skipped, waves = make_patches(args.spectra)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    scores = armnn_scores(args.tflite, patches)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "patches.npy"), patches)
    np.save(os.path.join(args.out, "armnn_scores.npy"), scores)
    if "music" in waves:
        write_wav(os.path.join(args.out, "music.wav"), waves["music"])
    with open(os.path.join(args.out, "patches.json"), "w") as f:
        json.dump({"names": names, "expected": {n: EXPECTED[n] for n in dict.fromkeys(names)},
                   "skipped": skipped, "log_offset": LOG_OFFSET, "patch_hop": PATCH_HOP}, f, indent=1)
        f.write("\n")
    rows = compare(args.model, args.out)
    worst = 0.0
    for r in rows:
        worst = max(worst, r["max_diff"])
        flag = "" if r["armnn_top"] == r["ref_top"] else "   TOP-1 DIFFERS"
        print(f"{r['name']:13s} ArmNN {r['armnn_top']} {r['armnn_score']:.4f}   float64 "
              f"{r['ref_top']} {r['ref_score']:.4f}   max|d| {r['max_diff']:.4f}{flag}")
    print(f"{len(rows)} patches, max |score difference| {worst:.4f} (limit {TOP1_TOLERANCE})")
    ok = worst <= TOP1_TOLERANCE and all(r["armnn_top"] == r["ref_top"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
