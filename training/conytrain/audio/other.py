"""The "other" class of train_your_own.py: sounds that are none of the user's classes.

A classifier trained on two classes has never heard anything else, so it calls music
"speech" at 0.99. An "other" class of everyday sounds, generated here without any network,
gives it somewhere to put them:

  speech  espeak-ng (Debian, in scripts/setup.sh's runtime list): sentences in six
          languages at random speeds and pitches
  music   conytrain.data.synth_music: random pieces in ten styles through FluidSynth and
          the General MIDI sound font (Debian's fluidsynth, fluid-soundfont-gm; left out
          with a warning where they are missing)
  noise   white to brown noise (conytrain.data.build.colored_noise), band-limited at random
  hum     steady sines and mains hum (conytrain.data.synth_tones)
  quiet   a faint noise floor, -75 to -55 dBFS

A kind whose name (or a synonym) is one of the user's labels is left out: a "speech" class
must not also be "other". Clips are 16 kHz mono PCM16 WAV, each a function of its seed.
"""
import os
import shutil
import subprocess
import wave

import numpy as np

from conytrain.data.build import SR, colored_noise, rms
from conytrain.data import synth_music, synth_tones

KINDS = ("speech", "music", "noise", "hum", "quiet")
# labels that mean a kind: a user class named so keeps the kind out of "other"
SYNONYMS = {
    "speech": {"speech", "voice", "voices", "talk", "talking", "speaking", "words"},
    "music": {"music", "song", "songs", "melody", "instrument"},
    "noise": {"noise", "static", "hiss"},
    "hum": {"hum", "tone", "tones", "sine", "buzz", "drone"},
    "quiet": {"silence", "quiet", "nothing", "background"},
}
SENTENCES = [
    ("en-us", "The meeting starts at nine, so please bring the reports with you."),
    ("en-gb", "I think we should take the train, it is much faster in the morning."),
    ("de", "Heute Abend gehen wir ins Kino und danach essen wir zusammen."),
    ("fr", "Nous avons visité le musée hier, et il y avait beaucoup de monde."),
    ("es", "Mañana vamos a la playa si el tiempo es bueno por la mañana."),
    ("it", "Il treno per Roma parte alle dieci dal binario numero tre."),
]


def kinds_for(labels):
    """The kinds of "other" for a model with @labels: those no label names."""
    names = {label.strip().lower() for label in labels}
    return [k for k in KINDS if not SYNONYMS[k] & names]


def music_available():
    return shutil.which("fluidsynth") is not None and os.path.isfile(synth_music.SOUNDFONT)


def write_wav(path, y):
    y = np.clip(np.asarray(y, np.float64), -1.0, 1.0)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((y * 32767).astype("<i2").tobytes())


def read_wav(path):
    with wave.open(path, "rb") as w:
        ch, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32768
    if width != 2 or rate != SR:
        raise RuntimeError(f"{path}: expected 16-bit {SR} Hz audio")
    return x.reshape(-1, ch).mean(1)


def fit(y, n, level_db):
    """@y cut or looped to @n samples at @level_db dBFS RMS."""
    if len(y) == 0:
        y = np.zeros(n)
    y = np.resize(y, n) if len(y) < n else y[:n]
    return y / rms(y) * 10 ** (level_db / 20) if rms(y) > 1e-9 else y


def speech(rng, n, tmp):
    voice, text = SENTENCES[int(rng.integers(len(SENTENCES)))]
    wav = os.path.join(tmp, "speech.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(int(rng.integers(130, 200))),
                    "-p", str(int(rng.integers(25, 75))), "-w", wav, text],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with wave.open(wav, "rb") as w:   # espeak-ng writes 22050 Hz: resample by interpolation
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32768
    x = np.interp(np.arange(0, len(x) * SR / rate) * rate / SR, np.arange(len(x)), x)
    gap = np.zeros(int(rng.uniform(0.1, 0.5) * SR))
    return fit(np.concatenate([x, gap]), n, rng.uniform(-30, -18))


def music(rng, n, tmp):
    x, _ = synth_music.render_synth_music(rng, n / SR, tmp, read_wav)
    return fit(x, n, rng.uniform(-26, -14))


def noise(rng, n, tmp):
    y = colored_noise(rng, n, float(rng.uniform(0.0, 2.0)))
    if rng.random() < 0.5:   # a band, as machines, wind, water are
        spec = np.fft.rfft(y)
        f = np.fft.rfftfreq(n, 1 / SR)
        lo = rng.uniform(50, 1500)
        spec[(f < lo) | (f > lo * rng.uniform(2, 8))] = 0
        y = np.fft.irfft(spec, n)
    return fit(y, n, rng.uniform(-36, -14))


def hum(rng, n, tmp):
    y, _ = synth_tones.clip(rng, "sine" if rng.random() < 0.5 else "hum", n)
    return y


def quiet(rng, n, tmp):
    return fit(colored_noise(rng, n, float(rng.uniform(0.0, 2.0))), n, rng.uniform(-75, -55))


MAKERS = {"speech": speech, "music": music, "noise": noise, "hum": hum, "quiet": quiet}


def make_clips(out_dir, kinds, count, seconds, seed, warn):
    """Writes @count clips of @seconds, the @kinds in turn, into @out_dir; returns their paths."""
    if "music" in kinds and not music_available():
        warn('"other" has no music: fluidsynth and fluid-soundfont-gm are not installed '
             "(scripts/setup.sh installs them)")
        kinds = [k for k in kinds if k != "music"]
    os.makedirs(out_dir, exist_ok=True)
    n = int(seconds * SR)
    paths = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        rng = np.random.default_rng([seed, i])
        path = os.path.join(out_dir, f"other_{i:03d}_{kind}.wav")
        write_wav(path, MAKERS[kind](rng, n, out_dir))
        paths.append(path)
    return paths
