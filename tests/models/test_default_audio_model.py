#!/usr/bin/python3
"""The shipped default audio model (models/audio/) loads and classifies generated clips.

    test_default_audio_model.py CONY_TOOL MODELS_DIR

Checks:
  * `cony info` loads transformer.safetensors; its labels equal labels.txt, its token
    size equals the CNN's embedding size;
  * the CNN is the one the classifier's config names (frontend.cnn, beside the classifier
    or in a sibling folder: yamnet-adapted.safetensors beside the shipped one; a config
    without one: vggish.safetensors beside it), its tokens its pooled
    embedding when frontend.cnn_output says so; its SHA-256 the one the config pins
    (cnn_sha256), and a CNN with activation quantisation (the shipped adapted YAMNet,
    models/audio/EXPERIMENTS.md rule 32) runs integer inference (`cony info`: precision
    int8 on all its layers), as the tools and elements below then do by default;
  * for each generated clip, `cony embed --model CNN [-e]` -> `cony classify --model
    transformer.safetensors` gives one step per 0.25 s (the frames of `cony mel`, the tail
    in one more window padded with silence) and the
    expected label is the most frequent per-step arg-max, on at least 60 % of the steps;
    the steady tone and the hum (labelled noise) get no step labelled silence;
  * the same clip through GStreamer (gst-launch-1.0 -m filesrc ! decodebin ! audioconvert !
    audioresample ! conymel [preset=yamnet] ! conyvggish [output=embedding] !
    conytransformer ! fakesink, the README's main pipeline) posts one conytransformer
    message per step whose labels are exactly those of the `cony` tools (skipped when
    gst-launch-1.0 or the plugin is not there);
  * the same clip through pipelines/file.sh (what the README's main command runs: uridecodebin,
    conyvggish batch=64) prints one line per step, at 0.25 s steps, with those labels.
Clips (made here, nothing downloaded): speech spoken by espeak-ng (skipped when espeak-ng
is not installed), a beeping alarm (2 kHz sine beeps, 0.25 s on / 0.25 s off), a quiet room
(white noise at -75 dBFS) and engine-like noise (low harmonic rumble plus noise at
-25 dBFS), synthetic clips of the kinds the data set synthesises; music (a pop-like bar
of drums, bass, chords and melody), an animal (bird-like trills of 3-5 kHz up-chirps), a
steady 440 Hz sine at -20 dBFS and 50 Hz mains hum with harmonics at -25 dBFS; and issue
44's repeated events: short 3.1 kHz beeps every 0.5 s through a cheap loudspeaker
(band-limited, soft-clipped) over a room noise floor, and pairs of synthesised barks
(falling harmonic series through two formants) every 1.1 s; each rendered with a fixed
seed. A model whose CNN sees a steady sound as flat (the VGGish
model before, models/audio/EXPERIMENTS.md) calls the last two silence: this test is the
guard that it does not.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

SR = 16000


def write_wav(path, x):
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def rms_to(x, dbfs):
    return x * (10 ** (dbfs / 20.0) / max(np.sqrt(np.mean(x ** 2)), 1e-12))


def without_preload():
    """The environment without LD_PRELOAD: scripts/sanitize.sh preloads the sanitizer
    runtime for the pipelines, and espeak-ng, a tool that only makes a clip, hangs under
    it."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def note(f, seconds, decay, partials):
    """A decaying harmonic note: partial k (from 1) of amplitude partials[k - 1]."""
    t = np.arange(int(seconds * SR)) / SR
    return np.exp(-decay * t) * sum(a * np.sin(2 * np.pi * f * k * t)
                                    for k, a in enumerate(partials, 1))


def add_at(x, seconds, y):
    s = int(seconds * SR)
    n = min(len(y), len(x) - s)
    x[s:s + n] += y[:n]


def music(n, rng):
    """Three 2 s bars at 120 bpm: kick, snare and hi-hat, bass, chords, a melody."""
    x = np.zeros(n)
    hz = lambda midi: 440.0 * 2 ** ((midi - 69) / 12)     # noqa: E731
    burst = lambda s, decay: rng.standard_normal(int(s * SR)) * np.exp(  # noqa: E731
        -decay * np.arange(int(s * SR)) / SR)
    for bar, chord in enumerate(((57, 60, 64), (53, 57, 60), (48, 52, 55))):
        for beat in range(4):
            at = 2.0 * bar + 0.5 * beat
            add_at(x, at, note(55, 0.25, 18, [1.5]) if beat % 2 == 0 else 0.5 * burst(0.15, 30))
            for half in (0.0, 0.25):
                add_at(x, at + half, 0.15 * burst(0.04, 100))
            add_at(x, at, 0.6 * note(hz(chord[0] - 24), 0.5, 3, [1, 0.5, 0.3]))
            for m in chord:
                add_at(x, at, 0.25 * note(hz(m), 0.5, 2, [1, 0.4, 0.2, 0.1]))
            melody = (chord[2], chord[1], chord[0], chord[1])[beat] + 12
            add_at(x, at, 0.4 * note(hz(melody), 0.5, 4, [1, 0.6, 0.3, 0.2, 0.1]))
    return x


def birdsong(n, rng):
    """Trills of 4 to 8 up-chirps (60 ms, 2.5-3.5 kHz rising by 1-2 kHz), 0.3-0.7 s apart."""
    x = np.zeros(n)
    d = 0.06
    t = np.arange(int(d * SR)) / SR
    at = 0.1
    while at < n / SR - 1.0:
        for _ in range(int(rng.integers(4, 9))):
            f0 = rng.uniform(2500, 3500)
            f1 = f0 + rng.uniform(1000, 2000)
            add_at(x, at, np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t ** 2 / (2 * d)))
                   * np.sin(np.pi * t / d) ** 2)
            at += 0.09
        at += rng.uniform(0.3, 0.7)
    return x + 0.003 * rng.standard_normal(n)


def band(x, lo, hi):
    """x through a cheap loudspeaker: an FFT band-pass lo..hi Hz."""
    f = np.fft.rfftfreq(len(x), 1.0 / SR)
    return np.fft.irfft(np.fft.rfft(x) * ((f >= lo) & (f <= hi)), len(x))


def beeps(n, rng):
    """Repeated short beeps (issue 44): a 3.1 kHz square wave, 0.1 s on every 0.5 s (an
    appliance or a timer), through a 500-4000 Hz loudspeaker and soft-clipped, over a room
    noise floor 25 dB down."""
    t = np.arange(n) / SR
    x = np.sign(np.sin(2 * np.pi * 3100 * t)) * (np.mod(t - 0.2, 0.5) < 0.1)
    x = np.tanh(3 * band(x, 500, 4000)) / np.tanh(3)
    return rms_to(x, -20) + rms_to(band(rng.standard_normal(n), 100, 2000), -45)


def barks(n, rng):
    """Repeated barks (issue 44): pairs of 0.15 s barks 0.3 s apart every 1.1 s, each a
    harmonic series falling from 600 to 380 Hz with some breath noise, shaped by two
    formants (about 900 and 2200 Hz), over a faint outdoor noise floor."""
    x = np.zeros(n)
    d = int(0.15 * SR)
    t = np.arange(d) / SR
    at = 0.1
    while at < n / SR:
        for k in range(2):
            f0 = rng.uniform(560, 640) * (1 - 0.37 * t / t[-1])
            ph = 2 * np.pi * np.cumsum(f0) / SR
            env = np.minimum(t / 0.01, 1.0) * np.exp(-t / 0.06)
            tone = sum(np.sin(h * ph) / h for h in range(1, 14))
            burst = env * (tone + 0.4 * rng.standard_normal(d))
            add_at(x, at + 0.3 * k, burst)
        at += 1.1
    spec = np.fft.rfft(x)
    f = np.fft.rfftfreq(n, 1.0 / SR)
    formants = np.exp(-((f - 900) / 350) ** 2) + 0.6 * np.exp(-((f - 2200) / 500) ** 2) + 0.05
    x = np.fft.irfft(spec * formants, n)
    return rms_to(x, -22) + rms_to(band(rng.standard_normal(n), 50, 1000), -55)


def clips(tmp):
    rng = np.random.default_rng(5)
    t = np.arange(int(6 * SR)) / SR
    out = {}
    gate = (np.mod(t, 0.5) < 0.25).astype(np.float64)
    out["alarm"] = rms_to(np.sin(2 * np.pi * 2000 * t) * gate, -20)
    out["silence"] = rms_to(rng.standard_normal(len(t)), -75)
    rumble = sum(np.sin(2 * np.pi * 55 * k * t + k) / k for k in range(1, 8))
    out["noise"] = rms_to(rumble + 0.8 * rng.standard_normal(len(t)), -25)
    out["music"] = rms_to(music(len(t), np.random.default_rng(7)), -20)
    out["animal"] = rms_to(birdsong(len(t), np.random.default_rng(5)), -22)
    out["alarm-beeps"] = beeps(len(t), np.random.default_rng(8))
    out["animal-barks"] = barks(len(t), np.random.default_rng(9))
    out["noise-tone440"] = rms_to(np.sin(2 * np.pi * 440 * t), -20)
    out["noise-hum50"] = rms_to(sum(np.sin(2 * np.pi * 50 * k * t + k) / k
                                    for k in range(1, 6)), -25)
    paths = {}
    for name, x in out.items():
        paths[name] = os.path.join(tmp, name + ".wav")
        write_wav(paths[name], x)
    espeak = shutil.which("espeak-ng")
    if espeak:
        raw = os.path.join(tmp, "speech_raw.wav")
        subprocess.run([espeak, "-v", "en-us", "-s", "150", "-w", raw,
                        "The weather today is mild, with a light wind from the west. "
                        "Tomorrow brings some rain in the afternoon."], check=True,
                       env=without_preload())
        paths["speech"] = raw      # 22.05 kHz: cony mel resamples
    else:
        print("# espeak-ng not installed: the speech clip is skipped")
    return paths


def front_end(models, cfg):
    """(CNN path, its tokens are the pooled embedding) as the classifier's config records
    them: frontend.cnn beside the classifier or in a sibling folder of models/ (YAMNet's
    models/yamnet/); a config without one was trained on vggish.safetensors beside it."""
    fe = cfg.get("frontend") or {}
    name = fe.get("cnn", "vggish.safetensors")
    for d in [models] + sorted(os.path.join(models, "..", s) for s in os.listdir(os.path.join(models, ".."))):
        if os.path.isfile(os.path.join(d, name)):
            return os.path.normpath(os.path.join(d, name)), fe.get("cnn_output") == "embedding"
    raise FileNotFoundError(f"the classifier's CNN {name} is neither in {models} nor beside it")


def quantised(cnn):
    """Whether the CNN file carries activation quantisation (its `quantization` key)."""
    with open(cnn, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return "quantization" in json.loads(f.read(n)).get("__metadata__", {})


def pipeline_labels(wav, cnn, tf, yamnet):
    """The per-step labels of the conytransformer bus messages for wav, or None when
    GStreamer or the plugin is missing."""
    launch = shutil.which("gst-launch-1.0")
    if not launch or not os.environ.get("GST_PLUGIN_PATH"):
        return None
    mel = ["conymel"] + (["preset=yamnet"] if yamnet else [])
    cnn_el = ["conyvggish", f"model={cnn}"] + (["output=embedding"] if yamnet else [])
    r = subprocess.run([launch, "-m", "filesrc", f"location={wav}", "!", "decodebin", "!",
                        "audioconvert", "!", "audioresample", "!"] + mel + ["!"] + cnn_el
                       + ["!", "conytransformer", f"model={tf}", "!", "fakesink"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"gst-launch-1.0 failed ({r.returncode}): {r.stdout[-2000:]}")
    return re.findall(r"\(element\): conytransformer, .*?label=\(string\)([^,]*),", r.stdout)


FILE_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pipelines", "file.sh")


def file_sh_lines(wav, cnn, tf):
    """(time, label, confidence) of each line pipelines/file.sh prints for wav, or None when
    GStreamer or the plugin is missing."""
    if not shutil.which("gst-launch-1.0") or not os.environ.get("GST_PLUGIN_PATH"):
        return None
    r = subprocess.run(["bash", FILE_SH, wav, cnn, tf], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"file.sh failed ({r.returncode}): {r.stderr[-2000:]}")
    lines = []
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\s*([0-9.]+) s  (\S+)\s+([0-9.]+)", line)
        if not m:
            raise RuntimeError(f"file.sh printed an unexpected line: {line!r}")
        lines.append((float(m.group(1)), m.group(2), float(m.group(3))))
    return lines


def main():
    cony, models = sys.argv[1], sys.argv[2]
    tf = os.path.join(models, "transformer.safetensors")
    with open(os.path.join(models, "labels.txt")) as f:
        labels = [line.strip() for line in f if line.strip()]
    failures = []
    info = subprocess.run([cony, "info", tf], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if info.returncode != 0:
        print(info.stderr)
        print("not ok 1 cony info")
        return 1
    print("ok 1 cony info loads transformer.safetensors")
    with open(tf, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        cfg = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
    if cfg["labels"] != labels:
        failures.append(f"labels.txt {labels} != model labels {cfg['labels']}")
    cnn, embedding = front_end(models, cfg)
    print(f"# CNN {cnn}{' (pooled embedding)' if embedding else ''}")
    with open(cnn, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    pinned = cfg.get("frontend", {}).get("cnn_sha256")
    precision = re.search(r"^precision: +(.*)$", subprocess.run(
        [cony, "info", cnn], check=True, stdout=subprocess.PIPE, text=True).stdout, re.M)
    want = "int8, all" if quantised(cnn) else "float"
    ok = pinned in (None, sha) and precision is not None and precision.group(1).startswith(want)
    print(f"{'ok' if ok else 'not ok'} 2 the CNN is the pinned one ({sha[:12]}, config "
          f"{(pinned or 'no pin')[:12]}) and runs {precision.group(1) if precision else '?'}")
    if not ok:
        failures.append("CNN pin or precision")
    i = 3
    with tempfile.TemporaryDirectory(prefix="cony-model-test-") as tmp:
        for name, wav in sorted(clips(tmp).items()):
            want = name.split("-")[0]           # noise-tone440: a noise clip
            mel, tok, lg = (os.path.join(tmp, name + s) for s in ("_mel.npy", "_tok.npy", "_lg.npy"))
            # cony embed makes the log-mel of the CNN's own front end (YAMNet's log offset)
            for cmd in ([cony, "mel", wav, "-o", mel],
                        [cony, "embed", "--model", cnn] + (["-e"] if embedding else [])
                        + [wav, "-o", tok],
                        [cony, "classify", "--model", tf, tok, "-o", lg]):
                subprocess.run(cmd, check=True)
            frames = np.load(mel).shape[0]
            tokens = np.load(tok)
            logits = np.load(lg)
            # full windows, and one more padded at the end for frames none covers (YAMNet)
            steps = 1 + -(-(frames - 96) // 25)
            ok = tokens.shape == (steps, cfg["d_in"]) and logits.shape == (steps, len(labels))
            pred = logits.argmax(1)
            counts = np.bincount(pred, minlength=len(labels))
            top = labels[int(counts.argmax())]
            share = counts.max() / len(pred)
            ok = ok and top == want and share >= 0.6
            if name.startswith("noise-"):       # a steady sound: never silence
                ok = ok and counts[labels.index("silence")] == 0
            summary = ", ".join(f"{labels[c]} {counts[c]}" for c in np.flatnonzero(counts))
            print(f"{'ok' if ok else 'not ok'} {i} {name}: {len(pred)} steps, dominant "
                  f"{top} ({100 * share:.0f} %): {summary}")
            if not ok:
                failures.append(name)
            i += 1
            got = pipeline_labels(wav, cnn, tf, embedding)
            if got is None:
                print(f"ok {i} {name} through gst-launch-1.0 # SKIP no gst-launch-1.0 or plugin path")
            else:
                same = got == [labels[p] for p in pred]
                print(f"{'ok' if same else 'not ok'} {i} {name} through gst-launch-1.0: "
                      f"{len(got)} step messages, {'the same' if same else 'NOT the same'} "
                      f"labels as cony classify")
                if not same:
                    print(f"# pipeline: {got}\n# cony:     {[labels[p] for p in pred]}")
                    failures.append(name + " (pipeline)")
            i += 1
            lines = file_sh_lines(wav, cnn, tf)
            if lines is None:
                print(f"ok {i} {name} through pipelines/file.sh # SKIP no gst-launch-1.0 or plugin path")
            else:
                same = ([l for _, l, _ in lines] == [labels[p] for p in pred]
                        # the time column: the end of the input covered, the last sample
                        # of step k's 0.975 s VGGish window (printed to 0.01 s)
                        and all(abs(t - (0.975 + 0.25 * k)) < 0.0051
                                for k, (t, _, _) in enumerate(lines))
                        and all(0 < c <= 1 for _, _, c in lines))
                print(f"{'ok' if same else 'not ok'} {i} {name} through pipelines/file.sh: "
                      f"{len(lines)} lines, {'the same' if same else 'NOT the same'} steps as cony classify")
                if not same:
                    print(f"# file.sh: {lines}")
                    failures.append(name + " (file.sh)")
            i += 1
    print(f"1..{i - 1}")
    for f in failures:
        print(f"# FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
