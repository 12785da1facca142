#!/usr/bin/python3
"""Cut and synthesise the labelled audio data set (16 kHz mono PCM16 WAV + manifest.csv).

Called by build_audio_dataset.sh after it has installed the tools (sox, espeak-ng, flite)
and unpacked the Debian data packages under SRC (SRC/<package>/usr/...). Needs only numpy
and the standard library; sox does decoding and resampling, espeak-ng and flite speak.

Every clip is planned up front from one seeded RNG and then rendered by a worker with its
own seed, so the output does not depend on the number of jobs or on their order.
The split is made per *group* (a source file, or a set of files that share a speaker:
one tuxpaint language, one fillets level) and is global: a group is in train or in test
for every class and family that uses it, so no source file has clips in both splits.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from conytrain.data import data_versions, synth_music
from conytrain.data.data_versions import ADDED, VERSIONS, read_table

SR = 16000
CLASSES = ["speech", "music", "noise", "alarm", "animal", "silence"]

# Families whose clips are not what their class says, dropped from the planned clips before
# rendering unless --keep-mislabelled. Every clip is planned with the family and rendered
# from its own seed, so every other clip stays byte-identical.
# fillets_en: fillets-ng-data's sound/<level>/en/ directories hold the game's sound effects
# (keyboards, motors, clicks, a red alert, phones, an alarm clock, a washing machine, snoring,
# a piano) and a few character voices; the English dialogue is not voiced. Data set versions
# 2-6 labelled those clips speech; version 7 is version 5 without them.
MISLABELLED_FAMILIES = ("fillets_en",)

# RMS level range (dBFS) each class is normalised to (the "gain" augmentation).
LEVELS = {
    "speech": (-32.0, -14.0),
    "music": (-30.0, -12.0),
    "noise": (-40.0, -14.0),
    "alarm": (-32.0, -12.0),
    "animal": (-32.0, -14.0),
    "silence": (-90.0, -58.0),
}
# Probability of mixing in a low background noise (SNR 20..45 dB) as augmentation.
NOISE_MIX_P = {"speech": 0.3, "music": 0.2, "alarm": 0.4, "animal": 0.3, "noise": 0.0, "silence": 0.0}


class DataError(Exception):
    pass


# --------------------------------------------------------------------------- audio helpers

def sox_decode(path, start=None, dur=None):
    """Decode any file sox reads to float32 mono 16 kHz."""
    cmd = ["sox", "-q", "-V1", path, "-t", "raw", "-e", "floating-point", "-b", "32",
           "-r", str(SR), "-c", "1", "-"]
    if start is not None:
        cmd += ["trim", "%.4f" % start, "%.4f" % dur]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise DataError("sox could not decode %s: %s" % (path, p.stderr.decode(errors="replace").strip()))
    return np.frombuffer(p.stdout, dtype=np.float32).astype(np.float64)


def sox_duration(path):
    p = subprocess.run(["soxi", "-D", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise DataError("soxi could not read %s: %s" % (path, p.stderr.decode(errors="replace").strip()))
    return float(p.stdout.decode().strip())


def rms(x):
    return float(np.sqrt(np.mean(np.square(x)) + 1e-20))


def db(x):
    return 20.0 * np.log10(max(x, 1e-10))


def trim_quiet(x, thresh_db=-45.0, frame=160):
    """Cut leading/trailing frames quieter than thresh_db relative to the loudest frame."""
    n = len(x) // frame
    if n < 2:
        return x
    e = np.sqrt(np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-20)
    ok = np.nonzero(20 * np.log10(e / (e.max() + 1e-20)) > thresh_db)[0]
    if len(ok) == 0:
        return x
    return x[ok[0] * frame: (ok[-1] + 1) * frame]


def subwindow_db(x, win=SR):
    """RMS in dBFS of each consecutive 1 s piece."""
    n = max(1, len(x) // win)
    return np.array([db(rms(x[i * win:(i + 1) * win])) for i in range(n)])


def colored_noise(rng, n, alpha):
    """Noise with power spectrum ~ 1/f^alpha (0 white, 1 pink, 2 brown), unit RMS."""
    w = rng.standard_normal(n)
    if alpha == 0:
        return w / rms(w)
    spec = np.fft.rfft(w)
    f = np.fft.rfftfreq(n, 1.0 / SR)
    f[0] = f[1]
    spec *= f ** (-alpha / 2.0)
    y = np.fft.irfft(spec, n)
    return y / rms(y)


def band_filter(rng, x, lo, hi):
    """Brick-ish band-pass with smooth (raised-cosine) edges, done in the frequency domain."""
    n = len(x)
    spec = np.fft.rfft(x)
    f = np.fft.rfftfreq(n, 1.0 / SR)
    g = np.ones_like(f)
    edge = 0.25
    g *= np.clip((f - lo * (1 - edge)) / (lo * edge + 1e-9), 0, 1) if lo > 0 else 1
    g *= np.clip((hi * (1 + edge) - f) / (hi * edge), 0, 1)
    y = np.fft.irfft(spec * g, n)
    return y / rms(y)


def smooth_random(rng, n, rate_hz):
    """Slowly varying random curve in [0,1] (for gusts and modulation)."""
    k = max(2, int(n / SR * rate_hz) + 2)
    pts = rng.random(k)
    return np.interp(np.linspace(0, k - 1, n), np.arange(k), pts)


def tone(f, t, wave_kind, phase=0.0):
    ph = 2 * np.pi * np.cumsum(f) / SR + phase if np.ndim(f) else 2 * np.pi * f * t + phase
    if wave_kind == "sine":
        return np.sin(ph)
    if wave_kind == "square":  # band-limited: odd harmonics up to 7 kHz
        y = np.zeros_like(ph)
        fmax = np.max(f)
        for k in range(1, 40, 2):
            if k * fmax > 7000:
                break
            y += np.sin(k * ph) / k
        return y
    if wave_kind == "triangle":
        y = np.zeros_like(ph)
        fmax = np.max(f)
        for i, k in enumerate(range(1, 40, 2)):
            if k * fmax > 7000:
                break
            y += ((-1) ** i) * np.sin(k * ph) / (k * k)
        return y
    raise ValueError(wave_kind)


def envelope_from_pattern(n, pattern, ramp=0.004):
    """pattern: list of (on_seconds, off_seconds), repeated to fill n samples; soft edges."""
    env = np.zeros(n)
    pos = 0
    r = max(1, int(ramp * SR))
    while pos < n:
        for on, off in pattern:
            a, b = pos, min(n, pos + int(on * SR))
            if b > a:
                seg = np.ones(b - a)
                m = min(r, (b - a) // 2)
                if m > 0:
                    seg[:m] = np.linspace(0, 1, m)
                    seg[-m:] = np.linspace(1, 0, m)
                env[a:b] = seg
            pos += int((on + off) * SR)
            if pos >= n:
                break
    return env


# --------------------------------------------------------------------------- source catalogue

def find(root, pattern_dir, regex):
    """Sorted files under root/pattern_dir whose path (relative to root) matches regex."""
    base = os.path.join(root, pattern_dir)
    out = []
    if not os.path.isdir(base):
        return out
    rx = re.compile(regex)
    for d, _, files in os.walk(base):
        for f in files:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            if rx.search(rel):
                out.append(p)
    return sorted(out)


def need(files, what, minimum=1):
    if len(files) < minimum:
        raise DataError("expected at least %d files for %s, found %d (is the package extracted?)"
                        % (minimum, what, len(files)))
    return files


class Catalogue:
    """Files of every Debian data package, found under SRC/<package>/."""

    def __init__(self, src):
        self.src = src

    def pkg(self, name):
        root = os.path.join(self.src, name)
        if not os.path.isdir(root):
            raise DataError("package %s is not extracted under %s" % (name, root))
        return root

    def rel(self, path):
        """package:/usr/... name used in the manifest."""
        r = os.path.relpath(path, self.src)
        pkg, _, rest = r.partition(os.sep)
        return "%s:/%s" % (pkg, rest)


# --------------------------------------------------------------------------- families
# A family yields ClipSpecs for one class from one kind of source. Each has .groups
# (sorted list of group keys) and .plan(split_groups, n, rng) -> list of specs.

class Spec(dict):
    pass


class LongFiles:
    """Windows cut from long recordings (music tracks, long noise); group = file."""

    def __init__(self, name, package, label, files, cat, skip_head=2.0):
        self.name, self.package, self.label, self.files, self.cat = name, package, label, files, cat
        self.skip_head = skip_head
        self.groups = [cat.rel(f) for f in files]
        self.by_group = dict(zip(self.groups, files))
        self.durations = {}

    def prepare(self, pool):
        # decode every file once to get its loudness per second: windows are planned only
        # where every second is active (no silent intros, gaps or placeholder tracks)
        acts = list(pool.map(lambda f: subwindow_db(sox_decode(f)), self.files))
        self.active = {}
        for g, a in zip(self.groups, acts):
            self.durations[g] = float(len(a))
            ref = float(np.median(a))
            self.active[g] = (a > -45.0) & (a > ref - 25.0)

    def plan(self, groups, n, rng, clip_s):
        groups = [g for g in groups if self.durations[g] >= clip_s + 1.0]
        if n == 0:
            return []
        if not groups:
            raise DataError("family %s has no usable file in this split" % self.name)
        # candidate slots per file (non-overlapping, random phase), shuffled
        slots = {}
        for g in groups:
            d = self.durations[g]
            head = min(self.skip_head, max(0.0, d - clip_s - 0.5))
            k = int((d - head - 0.5) // clip_s)
            phase = rng.random() * ((d - head - 0.5) - k * clip_s)
            act = self.active[g]
            s = [st for st in (head + phase + i * clip_s for i in range(k))
                 if act[int(st): int(st + clip_s) + 1].all()]
            rng.shuffle(s)
            slots[g] = s
        groups = [g for g in groups if slots[g]]
        if not groups:
            raise DataError("family %s has no file with an active %.1f s window in this split" % (self.name, clip_s))
        order = list(groups)
        rng.shuffle(order)
        # round-robin over files; each clip gets up to 4 candidate slots of its own
        jobs_per_file = Counter()
        i = 0
        while sum(jobs_per_file.values()) < n:
            g = order[i % len(order)]
            i += 1
            jobs_per_file[g] += 1
            if i > 100000:
                break
        specs = []
        for g in order:
            m = jobs_per_file[g]
            if m == 0:
                continue
            s = slots[g]
            for j in range(m):
                cand = s[j::m][:4] if len(s) >= m else [s[j % len(s)]]
                specs.append(Spec(kind="long", file=self.by_group[g], group=g, starts=cand))
        return specs[:n]


class ShortConcat:
    """Short utterances of one group (speaker/level) joined with small gaps."""

    def __init__(self, name, package, label, groups_files, cat, files_per_clip):
        self.name, self.package, self.label, self.cat = name, package, label, cat
        self.groups_files = groups_files  # dict group -> sorted files
        self.groups = sorted(groups_files)
        self.k = files_per_clip

    def prepare(self, pool):
        pass

    def plan(self, groups, n, rng, clip_s):
        if n == 0:
            return []
        if not groups:
            raise DataError("family %s has no group in this split" % self.name)
        pools = {}
        for g in groups:
            fs = list(self.groups_files[g])
            rng.shuffle(fs)
            pools[g] = fs
        order = list(groups)
        rng.shuffle(order)
        cursor = Counter()
        specs = []
        i = 0
        while len(specs) < n:
            g = order[i % len(order)]
            i += 1
            fs = pools[g]
            c = cursor[g]
            run = [fs[(c + j) % len(fs)] for j in range(self.k)]
            cursor[g] += self.k
            specs.append(Spec(kind="concat", files=run, group=g))
        return specs


class LoopFiles:
    """A short sound repeated (animal calls, alarm sounds, short noise loops); group = file."""

    def __init__(self, name, package, label, files, cat, gap=(0.05, 0.35), crossfade=False):
        self.name, self.package, self.label, self.files, self.cat = name, package, label, files, cat
        self.groups = [cat.rel(f) for f in files]
        self.by_group = dict(zip(self.groups, files))
        self.gap, self.crossfade = gap, crossfade

    def prepare(self, pool):
        peaks = list(pool.map(lambda f: float(np.max(np.abs(sox_decode(f)), initial=0.0)), self.files))
        keep = [p > 10 ** (-50 / 20) for p in peaks]
        for f, k in zip(self.files, keep):
            if not k:
                print("note: %s is silent (a placeholder), not used" % self.cat.rel(f), file=sys.stderr)
        self.files = [f for f, k in zip(self.files, keep) if k]
        self.groups = [self.cat.rel(f) for f in self.files]
        self.by_group = dict(zip(self.groups, self.files))
        need(self.files, "family %s (after dropping silent files)" % self.name, 3)

    def plan(self, groups, n, rng, clip_s):
        if n == 0:
            return []
        if not groups:
            raise DataError("family %s has no file in this split" % self.name)
        order = list(groups)
        rng.shuffle(order)
        return [Spec(kind="loop", file=self.by_group[order[i % len(order)]],
                     group=order[i % len(order)], gap=self.gap, crossfade=self.crossfade)
                for i in range(n)]


class LoopGroups(LoopFiles):
    """Like LoopFiles, but a group is a recording's stem: files that differ only in a
    trailing take number (bird1_00.ogg, bird1_01.ogg; Water1.wav .. Water5.wav) are takes
    or cuts of one recording, so they share a group and a split. Each clip loops one file
    of its group."""

    def _regroup(self):
        self.members = defaultdict(list)
        for f in self.files:
            self.members[stem_group(self.cat, f)].append(f)
        self.groups = sorted(self.members)

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._regroup()

    def prepare(self, pool):
        super().prepare(pool)
        self._regroup()

    def plan(self, groups, n, rng, clip_s):
        if n == 0:
            return []
        if not groups:
            raise DataError("family %s has no group in this split" % self.name)
        order = list(groups)
        rng.shuffle(order)
        specs = []
        for i in range(n):
            g = order[i % len(order)]
            fs = self.members[g]
            specs.append(Spec(kind="loop", file=fs[int(rng.integers(len(fs)))], group=g,
                              gap=self.gap, crossfade=self.crossfade))
        return specs


def stem_group(cat, f):
    """Group key of a take: package:/dir/name with a trailing take number removed."""
    rel = cat.rel(f)
    d, b = rel.rsplit("/", 1)
    b = re.sub(r"\.(ogg|oga|wav|flac|mp3)$", "", b)
    b = re.sub(r"[-_.]?[0-9]+$", "", b)
    return "%s/%s" % (d, b)


class Synth:
    """Synthesised clips; every clip is its own group."""

    def __init__(self, name, label, kind, package="synth(numpy)"):
        self.name, self.label, self.kind, self.package = name, label, kind, package
        self.groups = None  # split decided per clip

    def prepare(self, pool):
        pass

    def plan(self, groups, n, rng, clip_s):
        return [Spec(kind=self.kind) for _ in range(n)]


# --------------------------------------------------------------------------- rendering

ESPEAK_LANGS = ["en", "en-us", "en-gb-scotland", "de", "es", "fr", "it", "nl", "pt", "pl", "sv", "cs"]
ESPEAK_VARIANTS = ["", "+m1", "+m2", "+m3", "+m4", "+m5", "+m6", "+m7", "+f1", "+f2", "+f3", "+f4",
                   "+klatt", "+klatt2", "+klatt3", "+croak", "+Andy", "+Annie", "+Denis", "+Gene",
                   "+Jacky", "+Lee", "+Mr serious", "+Storm", "+belinda", "+steph", "+quincy"]
FLITE_VOICES = ["kal", "kal16", "awb", "rms", "slt"]


def render_long(spec, rng, clip_s):
    best, best_score = None, -1e9
    for s in spec["starts"]:
        x = sox_decode(spec["file"], s, clip_s)
        if len(x) < int(clip_s * SR) - 2:
            continue
        sub = subwindow_db(x)
        score = float(sub.min())
        if score > best_score:
            best, best_score, best_start = x, score, s
        if score > -45.0 and score > db(rms(x)) - 25.0:
            break
    if best is None:
        raise DataError("no window of %.1f s in %s" % (clip_s, spec["file"]))
    return best, [spec["file"]], "start=%.2f" % best_start


def render_concat(spec, rng, clip_s):
    need_n = int(clip_s * SR)
    parts, used, total = [], [], 0
    files = spec["files"]
    i = 0
    while total < need_n + SR // 2 and i < 4 * len(files):
        f = files[i % len(files)]
        i += 1
        x = sox_decode(f)
        x = trim_quiet(x)
        if len(x) < SR // 10:
            continue
        # equalise loudness of utterances a little (different takes)
        x = x / (rms(x) + 1e-9) * 0.1
        gap = np.zeros(int(rng.uniform(0.08, 0.35) * SR))
        parts += [x, gap]
        total += len(x) + len(gap)
        if f not in used:
            used.append(f)
    y = np.concatenate(parts) if parts else np.zeros(0)
    if len(y) < need_n:
        y = np.concatenate([y, np.zeros(need_n - len(y))])
    off = int(rng.integers(0, max(1, min(len(y) - need_n, SR // 4) + 1)))
    return y[off: off + need_n], used, "files=%d" % len(used)


def render_loop(spec, rng, clip_s):
    need_n = int(clip_s * SR)
    x = sox_decode(spec["file"])
    x = trim_quiet(x, -40.0)
    if len(x) < SR // 20:
        raise DataError("%s is (nearly) silent" % spec["file"])
    x = x / (rms(x) + 1e-9) * 0.1
    parts, total = [], 0
    if spec["crossfade"]:
        cf = min(len(x) // 4, int(0.05 * SR))
        ramp = np.linspace(0, 1, cf) if cf > 0 else None
        y = x.copy()
        while len(y) < need_n + len(x):
            if cf > 0:
                y[-cf:] = y[-cf:] * (1 - ramp) + x[:cf] * ramp
                y = np.concatenate([y, x[cf:]])
            else:
                y = np.concatenate([y, x])
    else:
        lo, hi = spec["gap"]
        while total < need_n + len(x):
            g = np.zeros(int(rng.uniform(lo, hi) * SR))
            # small per-repetition gain change (a real call is never repeated exactly)
            parts += [x * 10 ** (rng.uniform(-3, 3) / 20), g]
            total += len(x) + len(g)
        y = np.concatenate(parts)
    off = int(rng.integers(0, max(1, min(len(y) - need_n, len(x)) + 1)))
    return y[off: off + need_n], [spec["file"]], "loop"


def synth_noise(rng, n):
    kind = rng.choice(["white", "pink", "brown", "band", "wind", "rain", "fan", "engine", "hiss"])
    if kind in ("white", "pink", "brown"):
        y = colored_noise(rng, n, {"white": 0, "pink": 1, "brown": 2}[kind])
        detail = kind
    elif kind == "band":
        lo = float(rng.uniform(50, 2000))
        hi = float(min(7800, lo * rng.uniform(2, 16)))
        y = band_filter(rng, colored_noise(rng, n, float(rng.uniform(0, 1.5))), lo, hi)
        detail = "band %d-%d Hz" % (lo, hi)
    elif kind == "wind":
        base = band_filter(rng, colored_noise(rng, n, 1.5), 40, float(rng.uniform(400, 1500)))
        gust = 0.25 + smooth_random(rng, n, float(rng.uniform(0.5, 2.0)))
        y = base * gust
        detail = "wind"
    elif kind == "rain":
        bed = colored_noise(rng, n, float(rng.uniform(0, 1)))
        drops = np.zeros(n)
        k = int(rng.uniform(50, 400) * n / SR)
        pos = rng.integers(0, n - 200, k)
        for p in pos:
            L = int(rng.integers(20, 150))
            drops[p:p + L] += rng.standard_normal(L) * np.exp(-np.arange(L) / (L / 4)) * rng.uniform(1, 5)
        y = bed + drops
        detail = "rain"
    elif kind == "fan":
        f0 = float(rng.uniform(20, 120))
        t = np.arange(n) / SR
        hum = sum(np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 6.3)) / h for h in range(1, 6))
        y = colored_noise(rng, n, float(rng.uniform(0.5, 1.5))) + hum / rms(hum) * rng.uniform(0.1, 0.6)
        detail = "fan %.0f Hz" % f0
    elif kind == "engine":
        t = np.arange(n) / SR
        f0 = float(rng.uniform(25, 90)) * (1 + 0.1 * smooth_random(rng, n, 0.5))
        ph = 2 * np.pi * np.cumsum(f0) / SR
        harm = sum(np.sin(h * ph + rng.uniform(0, 6.3)) / h ** 0.7 for h in range(1, 12))
        rough = band_filter(rng, colored_noise(rng, n, 1.0), 60, 3000)
        y = harm / rms(harm) * rng.uniform(0.5, 1.0) + rough * (0.6 + 0.4 * np.sin(ph / 2))
        detail = "engine"
    else:  # hiss: high-passed noise (steam, spray, tape)
        y = band_filter(rng, colored_noise(rng, n, 0), float(rng.uniform(1500, 4000)), 7800)
        detail = "hiss"
    if rng.random() < 0.3 and kind not in ("wind",):
        y = y * (0.6 + 0.4 * smooth_random(rng, n, float(rng.uniform(0.2, 1.0))))
        detail += " +slow AM"
    return y, detail


def synth_silence(rng, n):
    kind = rng.choice(["digital", "floor", "floor", "hum", "room"])
    t = np.arange(n) / SR
    if kind == "digital":
        return np.zeros(n), "digital zero"
    if kind == "floor":
        a = float(rng.uniform(0, 2))
        return colored_noise(rng, n, a), "noise floor alpha=%.2f" % a
    if kind == "hum":
        f = float(rng.choice([50.0, 60.0]))
        h = sum(np.sin(2 * np.pi * f * k * t + rng.uniform(0, 6.3)) * rng.uniform(0.1, 1) / k for k in range(1, 6))
        return h / rms(h) + 0.5 * colored_noise(rng, n, 1), "mains hum %d Hz" % f
    # quiet room: low brown/pink floor with a few faint ticks
    y = colored_noise(rng, n, float(rng.uniform(1, 2)))
    for p in rng.integers(0, n - 400, int(rng.integers(0, 5))):
        y[p:p + 200] += rng.standard_normal(200) * np.exp(-np.arange(200) / 40) * 3
    return y, "quiet room"


def synth_alarm(rng, n):
    kind = rng.choice(["beep", "t3", "t4", "siren_wail", "siren_yelp", "hilo", "ring", "clock", "buzzer"])
    t = np.arange(n) / SR
    wk = str(rng.choice(["sine", "square", "triangle"]))
    if kind == "beep":
        f = float(rng.uniform(500, 4000))
        on, off = float(rng.uniform(0.08, 0.5)), float(rng.uniform(0.05, 0.45))
        y = tone(f, t, wk) * envelope_from_pattern(n, [(on, off)])
        detail = "beep %s %.0f Hz %.2f/%.2f s" % (wk, f, on, off)
    elif kind in ("t3", "t4"):  # smoke / CO alarm temporal patterns (pause shortened to 0.8 s)
        f = float(rng.choice([520.0, 3100.0])) * rng.uniform(0.93, 1.07)
        if kind == "t3":
            pat = [(0.5, 0.5), (0.5, 0.5), (0.5, 0.8)]
        else:
            pat = [(0.1, 0.1)] * 3 + [(0.1, 0.8)]
        y = tone(f, t, "square" if f < 1000 else wk) * envelope_from_pattern(n, pat)
        detail = "%s pattern %.0f Hz" % (kind, f)
    elif kind == "siren_wail":
        lo, hi = float(rng.uniform(500, 800)), float(rng.uniform(1200, 1800))
        per = float(rng.uniform(1.5, 5.0))
        f = lo + (hi - lo) * 0.5 * (1 - np.cos(2 * np.pi * t / per + rng.uniform(0, 6.3)))
        y = tone(f, t, wk)
        detail = "wail %.0f-%.0f Hz %.1f s" % (lo, hi, per)
    elif kind == "siren_yelp":
        lo, hi = float(rng.uniform(500, 800)), float(rng.uniform(1300, 1900))
        per = float(rng.uniform(0.15, 0.4))
        f = lo + (hi - lo) * ((t / per) % 1.0)
        y = tone(f, t, wk)
        detail = "yelp %.0f-%.0f Hz %.2f s" % (lo, hi, per)
    elif kind == "hilo":
        a, b = float(rng.uniform(400, 700)), float(rng.uniform(700, 1100))
        per = float(rng.uniform(0.4, 1.0))
        f = np.where((t / per) % 1.0 < 0.5, a, b)
        y = tone(f, t, wk)
        detail = "hi-lo %.0f/%.0f Hz" % (a, b)
    elif kind == "ring":  # telephone ringing: two tones, or one tone modulated at 20-25 Hz
        if rng.random() < 0.5:
            y = np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 480 * t)
        else:
            fm = float(rng.uniform(20, 25))
            y = np.sin(2 * np.pi * float(rng.uniform(400, 450)) * t) * (0.6 + 0.4 * np.sign(np.sin(2 * np.pi * fm * t)))
        y = y * envelope_from_pattern(n, [(0.4, 0.2), (0.4, float(rng.uniform(0.3, 0.7)))])
        detail = "phone ring"
    elif kind == "clock":  # alarm clock: groups of fast beeps
        f = float(rng.uniform(1500, 4000))
        k = int(rng.integers(2, 5))
        y = tone(f, t, wk) * envelope_from_pattern(n, [(0.06, 0.06)] * (k - 1) + [(0.06, float(rng.uniform(0.25, 0.5)))])
        detail = "alarm clock %.0f Hz x%d" % (f, k)
    else:  # buzzer: low harsh square, continuous or pulsed
        f = float(rng.uniform(90, 400))
        y = tone(f, t, "square")
        if rng.random() < 0.5:
            y = y * envelope_from_pattern(n, [(float(rng.uniform(0.3, 0.8)), float(rng.uniform(0.1, 0.4)))])
        detail = "buzzer %.0f Hz" % f
    return y, detail


# ---- version 3 of the synthesised alarms (--alarm-synth v3): far more varied sounds, heard
# through a room and a small loudspeaker, over real background noise. Real alarm recordings
# are scarce in Debian's packages, so the synthesised ones must cover what real alarms sound
# like: ringtones and chimes, bells, digital beeps of many timbres, sirens that drift.

BELL_PARTIALS = [0.5, 1.0, 1.19, 1.5, 2.0, 2.5, 2.67, 3.0, 4.0]   # a bell's inharmonic partials


def _adsr_decay(n, decay_s, attack_s=0.003):
    t = np.arange(n) / SR
    a = np.clip(t / max(attack_s, 1e-4), 0, 1)
    return a * np.exp(-t / max(decay_s, 1e-3))


def _note(rng, f, dur_n, timbre, decay_s):
    """One note of dur_n samples at f Hz in a timbre: harmonic (decaying partials), bell
    (inharmonic partials, slow decay), fm (a two-operator FM tone), pulse (square-ish),
    marimba (fundamental plus a 4x partial, fast decay)."""
    t = np.arange(dur_n) / SR
    y = np.zeros(dur_n)
    if timbre == "harmonic":
        rolloff = float(rng.uniform(0.8, 2.0))
        for k in range(1, 12):
            if k * f > 7500:
                break
            y += np.sin(2 * np.pi * k * f * t + rng.uniform(0, 6.3)) / k ** rolloff * np.exp(-t * k * 0.5 / decay_s)
    elif timbre == "bell":
        for i, p in enumerate(BELL_PARTIALS):
            fp = f * p * rng.uniform(0.995, 1.005)
            if fp > 7500:
                break
            y += np.sin(2 * np.pi * fp * t) * rng.uniform(0.3, 1.0) * np.exp(-t * (1 + 0.4 * i) / decay_s)
    elif timbre == "fm":
        ratio = float(rng.choice([1.0, 2.0, 3.0, 1.41, 3.5]))
        index = float(rng.uniform(0.5, 4.0))
        y = np.sin(2 * np.pi * f * t + index * np.exp(-t / decay_s) * np.sin(2 * np.pi * f * ratio * t))
    elif timbre == "pulse":
        y = tone(f, t, "square") * 0.8 + np.sin(2 * np.pi * 2 * f * t) * 0.2
    else:  # marimba
        y = np.sin(2 * np.pi * f * t) + 0.4 * np.sin(2 * np.pi * 4 * f * t) * np.exp(-t * 6 / decay_s)
    env = _adsr_decay(dur_n, decay_s)
    r = min(dur_n // 2, int(0.004 * SR))
    if r > 0:
        env[-r:] *= np.linspace(1, 0, r)
    return y * env


def _place(y, x, pos):
    if pos >= len(y):
        return
    m = min(len(x), len(y) - pos)
    y[pos:pos + m] += x[:m]


def _scale(rng):
    base = 440.0 * 2 ** (float(rng.integers(-9, 16)) / 12.0)     # about 260 to 1100 Hz
    steps = [[0, 2, 4, 7, 9], [0, 2, 4, 5, 7, 9, 11], [0, 3, 5, 7, 10], [0, 4, 7]][int(rng.integers(0, 4))]
    return [base * 2 ** ((s + 12 * o) / 12.0) for o in (0, 1) for s in steps]


def synth_alarm_v3(rng, n):
    kind = str(rng.choice(["melody", "chime", "bell", "digital", "siren2", "wail", "yelp",
                           "buzzer", "trill", "classic"],
                          p=[0.18, 0.09, 0.1, 0.17, 0.1, 0.08, 0.07, 0.07, 0.07, 0.07]))
    t = np.arange(n) / SR
    y = np.zeros(n)
    if kind == "melody":  # a ringtone: a random short tune, repeated
        sc = _scale(rng)
        k = int(rng.integers(3, 9))
        notes = [sc[int(i)] for i in rng.integers(0, len(sc), k)]
        durs = rng.choice([0.1, 0.15, 0.2, 0.3], k) * rng.uniform(0.8, 1.3)
        timbre = str(rng.choice(["harmonic", "bell", "fm", "pulse", "marimba"]))
        decay = float(rng.uniform(0.08, 0.6))
        gap = float(rng.uniform(0.0, 0.6))
        pos = int(rng.uniform(0, 0.3) * SR)
        while pos < n:
            for f, d in zip(notes, durs):
                dn = int(d * SR)
                _place(y, _note(rng, f, int(dn * rng.uniform(1.0, 2.5)), timbre, decay), pos)
                pos += dn
            pos += int(gap * SR)
        detail = "melody %d notes %s decay %.2f s" % (k, timbre, decay)
    elif kind == "chime":  # door chime / notification: two to four struck notes, long decay
        sc = _scale(rng)
        k = int(rng.integers(2, 5))
        notes = [sc[int(i)] for i in rng.integers(0, len(sc), k)]
        step = float(rng.uniform(0.2, 0.6))
        timbre = str(rng.choice(["bell", "marimba", "harmonic", "fm"]))
        decay = float(rng.uniform(0.3, 1.2))
        period = k * step + float(rng.uniform(0.1, 0.6))
        pos = int(rng.uniform(0, 0.5) * SR)
        while pos < n:
            for j, f in enumerate(notes):
                _place(y, _note(rng, f, int(min(3 * decay, 2.5) * SR), timbre, decay), pos + int(j * step * SR))
            pos += int(period * SR)
        detail = "chime %d notes %s decay %.2f s" % (k, timbre, decay)
    elif kind == "bell":  # a struck bell, an electric bell (fast repeated strikes), a desk bell
        f = float(rng.uniform(300, 2500))
        if rng.random() < 0.4:
            rate = float(rng.uniform(12, 30))         # electric bell hammer
            dn = int(SR / rate)
            decay = float(rng.uniform(0.02, 0.08))
            on = float(rng.uniform(0.8, 3.0))
            off = float(rng.uniform(0.1, 0.6))
            pos = 0
            while pos < n:
                end = pos + int(on * SR)
                while pos < min(end, n):
                    _place(y, _note(rng, f, dn * 3, "bell", decay), pos)
                    pos += dn
                pos = end + int(off * SR)
            detail = "electric bell %.0f Hz %.0f/s" % (f, rate)
        else:
            decay = float(rng.uniform(0.2, 1.5))
            period = float(rng.uniform(0.25, 0.9))
            pos = int(rng.uniform(0, 0.3) * SR)
            while pos < n:
                _place(y, _note(rng, f * rng.uniform(0.99, 1.01), int(min(4 * decay, 3.0) * SR), "bell", decay), pos)
                pos += int(period * rng.uniform(0.9, 1.1) * SR)
            detail = "bell %.0f Hz decay %.2f every %.2f s" % (f, decay, period)
    elif kind == "digital":  # digital alarm clock / appliance / watch beeps
        f = float(rng.uniform(800, 4500))
        wk = str(rng.choice(["sine", "square", "triangle"]))
        nb = int(rng.integers(1, 6))
        on = float(rng.uniform(0.03, 0.25))
        inner = float(rng.uniform(0.03, 0.15))
        outer = float(rng.uniform(0.1, 0.8))
        pat = [(on, inner)] * (nb - 1) + [(on, outer)]
        x = tone(f, t, wk)
        if rng.random() < 0.3:  # two-frequency beeps (warble)
            x = x * 0.6 + tone(f * rng.uniform(1.1, 1.6), t, wk) * 0.4
        y = x * envelope_from_pattern(n, pat, ramp=float(rng.uniform(0.001, 0.01)))
        detail = "digital %s %.0f Hz %dx%.2f s" % (wk, f, nb, on)
    elif kind == "siren2":  # two-tone siren (European), pitch drifting like a passing vehicle
        a = float(rng.uniform(350, 900))
        b = a * float(rng.uniform(1.2, 1.5))
        per = float(rng.uniform(0.8, 2.5))
        f = np.where((t / per + rng.uniform(0, 1)) % 1.0 < 0.5, a, b)
        f = f * (1 + 0.06 * (smooth_random(rng, n, 0.5) - 0.5))
        y = _siren_voice(rng, f, t)
        detail = "two-tone %.0f/%.0f Hz %.1f s" % (a, b, per)
    elif kind in ("wail", "yelp"):
        lo = float(rng.uniform(400, 900))
        hi = lo * float(rng.uniform(1.6, 2.6))
        per = float(rng.uniform(1.5, 6.0)) if kind == "wail" else float(rng.uniform(0.12, 0.45))
        ph = t / per + rng.uniform(0, 1)
        shape = 0.5 * (1 - np.cos(2 * np.pi * ph)) if rng.random() < 0.5 else np.abs(2 * (ph % 1.0) - 1)
        f = (lo + (hi - lo) * shape) * (1 + 0.06 * (smooth_random(rng, n, 0.5) - 0.5))
        y = _siren_voice(rng, f, t)
        detail = "%s %.0f-%.0f Hz %.2f s" % (kind, lo, hi, per)
    elif kind == "buzzer":  # door buzzer, game-show buzzer, reversing alarm
        f = float(rng.uniform(80, 900))
        x = tone(f, t, "square") + 0.5 * np.sign(np.sin(2 * np.pi * f * 1.007 * t)) * 0.3
        x = x * (1 + 0.3 * np.sin(2 * np.pi * float(rng.uniform(20, 60)) * t))
        if rng.random() < 0.6:
            x = x * envelope_from_pattern(n, [(float(rng.uniform(0.15, 1.0)), float(rng.uniform(0.1, 0.6)))])
        y = x
        detail = "buzzer %.0f Hz" % f
    elif kind == "trill":  # phone trill: two tones alternating fast, in bursts
        a = float(rng.uniform(600, 2500))
        b = a * float(rng.uniform(1.1, 1.4))
        rate = float(rng.uniform(8, 25))
        f = np.where((t * rate) % 1.0 < 0.5, a, b)
        x = tone(f, t, str(rng.choice(["sine", "square", "triangle"])))
        on = float(rng.uniform(0.4, 2.0))
        y = x * envelope_from_pattern(n, [(on, float(rng.uniform(0.2, 0.8)))])
        detail = "trill %.0f/%.0f Hz %.0f/s" % (a, b, rate)
    else:  # the first version's generator
        y, detail = synth_alarm(rng, n)
    return y, detail


def _siren_voice(rng, f, t):
    """A siren's sound: a harmonic-rich tone (a horn) at the given pitch curve."""
    wk = str(rng.choice(["sine", "square", "triangle", "horn"]))
    if wk != "horn":
        return tone(f, t, wk)
    ph = 2 * np.pi * np.cumsum(f) / SR
    y = np.zeros_like(ph)
    for k in range(1, 10):
        if k * np.max(f) > 7500:
            break
        y += np.sin(k * ph) / k ** 1.2
    return y


def reverb_ir(rng, rt60):
    """A room impulse response: a direct path plus exponentially decaying noise (rt60 s),
    darker as it decays."""
    m = int(min(rt60, 1.2) * SR)
    tt = np.arange(m) / SR
    tail = rng.standard_normal(m) * np.exp(-6.9 * tt / rt60)
    tail = np.convolve(tail, np.ones(4) / 4, mode="same")
    ir = tail * float(rng.uniform(0.1, 0.4)) / np.sqrt(np.sum(tail ** 2) + 1e-12)
    ir[0] += 1.0
    return ir


def speaker_eq(rng, x):
    """A small loudspeaker (phone, laptop, clock radio): high-pass, low-pass, a resonance,
    optionally driven into soft clipping."""
    n = len(x)
    spec = np.fft.rfft(x)
    f = np.fft.rfftfreq(n, 1.0 / SR)
    hp = float(rng.uniform(150, 900))
    lp = float(rng.uniform(2500, 7500))
    g = 1 / np.sqrt(1 + (hp / np.maximum(f, 1)) ** 4) / np.sqrt(1 + (f / lp) ** 4)
    fr = float(rng.uniform(800, 4000))
    g *= 1 + float(rng.uniform(0, 2)) * np.exp(-0.5 * (np.log(np.maximum(f, 1) / fr) / 0.15) ** 2)
    y = np.fft.irfft(spec * g, n)
    if rng.random() < 0.3:
        drive = float(rng.uniform(1.5, 6))
        y = np.tanh(drive * y / (np.max(np.abs(y)) + 1e-9))
    return y


def alarm_v3_channel(rng, x, bg_files):
    """Speaker, room and real background noise for a synthesised v3 alarm clip."""
    n = len(x)
    det = []
    if rng.random() < 0.7:
        x = speaker_eq(rng, x)
        det.append("speaker")
    if rng.random() < 0.6:
        rt = float(rng.uniform(0.15, 1.0))
        x = fftconvolve_same(x, reverb_ir(rng, rt))
        det.append("room rt60=%.2f" % rt)
    if bg_files and rng.random() < 0.7:
        bf = bg_files[int(rng.integers(0, len(bg_files)))]
        with wave.open(bf, "rb") as w:
            bg = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
        bg = np.resize(bg, n)
        snr = float(rng.uniform(0, 20))
        x = x / (rms(x) + 1e-12)
        x = x + bg / (rms(bg) + 1e-12) * 10 ** (-snr / 20)
        det.append("bg %s snr=%.0f dB" % (os.path.basename(bf), snr))
    return x, det


def fftconvolve_same(x, h):
    m = len(x) + len(h) - 1
    nf = 1 << (m - 1).bit_length()
    y = np.fft.irfft(np.fft.rfft(x, nf) * np.fft.rfft(h, nf), nf)[:len(x)]
    return y


SENTENCES = None


def load_sentences():
    global SENTENCES
    if SENTENCES is None:
        txt = ""
        for p in ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GPL-2",
                  "/usr/share/common-licenses/LGPL-2.1", "/usr/share/common-licenses/Apache-2.0"]:
            if os.path.exists(p):
                with open(p, encoding="utf-8", errors="replace") as fh:
                    txt += " " + fh.read()
        txt = re.sub(r"\s+", " ", txt)
        s = [x.strip() for x in re.split(r"(?<=[.;:])\s", txt)]
        s = [x for x in s if 60 <= len(x) <= 400 and re.search(r"[a-z]{3}", x) and "http" not in x]
        if len(s) < 50:
            raise DataError("not enough text in /usr/share/common-licenses for the TTS speech")
        SENTENCES = sorted(set(s))
    return SENTENCES


def render_tts(spec, rng, clip_s, tmpdir):
    sents = load_sentences()
    i = int(rng.integers(0, len(sents)))
    text = " ".join(sents[i:i + 3])
    wav = os.path.join(tmpdir, "tts_%s.wav" % os.getpid() + "_%d" % int(rng.integers(0, 1 << 30)))
    if spec["kind"] == "espeak":
        voice = str(rng.choice(ESPEAK_LANGS)) + str(rng.choice(ESPEAK_VARIANTS))
        speed = int(rng.integers(120, 230))
        pitch = int(rng.integers(20, 80))
        cmd = ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", wav, "--stdin"]
        detail = "espeak-ng %s s=%d p=%d" % (voice, speed, pitch)
    else:
        voice = str(rng.choice(FLITE_VOICES))
        stretch = float(rng.uniform(0.8, 1.3))
        f0 = int(rng.integers(80, 200))
        cmd = ["flite", "-voice", voice, "--setf", "duration_stretch=%.2f" % stretch,
               "--setf", "int_f0_target_mean=%d" % f0, "-t", text, "-o", wav]
        detail = "flite %s stretch=%.2f f0=%d" % (voice, stretch, f0)
    p = subprocess.run(cmd, input=text.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0 or not os.path.exists(wav):
        raise DataError("%s failed: %s" % (cmd[0], p.stderr.decode(errors="replace").strip()))
    x = trim_quiet(sox_decode(wav))
    os.unlink(wav)
    need_n = int(clip_s * SR)
    if len(x) < need_n:
        x = np.concatenate([x, np.zeros(int(0.3 * SR)), x])[:need_n]
        x = np.concatenate([x, np.zeros(max(0, need_n - len(x)))])
    off = int(rng.integers(0, len(x) - need_n + 1))
    return x[off:off + need_n], [], detail


def render(job, clip_s, tmpdir):
    spec = job["spec"]
    rng = np.random.default_rng(job["seed"])
    n = int(clip_s * SR)
    label = job["label"]
    k = spec["kind"]
    if k == "long":
        x, used, detail = render_long(spec, rng, clip_s)
    elif k == "concat":
        x, used, detail = render_concat(spec, rng, clip_s)
    elif k == "loop":
        x, used, detail = render_loop(spec, rng, clip_s)
    elif k in ("espeak", "flite"):
        x, used, detail = render_tts(spec, rng, clip_s, tmpdir)
    elif k == "noise":
        x, detail = synth_noise(rng, n)
        used = []
    elif k == "alarm" and job.get("alarm_synth") == "v3":
        x, detail = synth_alarm_v3(rng, n)
        x, det = alarm_v3_channel(rng, x, job.get("bg_files"))
        detail = " ".join([detail] + det)
        used = []
    elif k == "alarm":
        x, detail = synth_alarm(rng, n)
        used = []
    elif k == "silence":
        x, detail = synth_silence(rng, n)
        used = []
    elif k == "midi_music":
        x, detail = synth_music.render_synth_music(rng, clip_s, tmpdir, sox_decode)
        used = []
    elif k == "quiet_real":  # a real noise recording far down in level: "quiet room"
        x, used, detail = render_loop(spec, rng, clip_s)
        detail = "quiet " + detail
    else:
        raise ValueError(k)
    x = np.asarray(x, dtype=np.float64)[:n]
    if len(x) < n:
        x = np.concatenate([x, np.zeros(n - len(x))])
    # gain augmentation: normalise to a random RMS level of the class range
    lo, hi = LEVELS[label]
    target_db = float(rng.uniform(lo, hi))
    if rms(x) > 1e-9:
        x = x / rms(x) * 10 ** (target_db / 20)
    else:
        target_db = -np.inf
    if rng.random() < NOISE_MIX_P[label]:
        snr = float(rng.uniform(20, 45))
        bg = colored_noise(rng, n, float(rng.uniform(0, 2)))
        x = x + bg * rms(x) * 10 ** (-snr / 20)
        detail += " +noise snr=%.0f dB" % snr
    if label == "silence" and k != "quiet_real" and detail == "digital zero":
        x[:] = 0
    peak = np.max(np.abs(x))
    if peak > 0.98:
        x = x * (0.98 / peak)
    pcm = np.round(x * 32767).astype("<i2")
    os.makedirs(os.path.dirname(job["path_abs"]), exist_ok=True)
    with wave.open(job["path_abs"], "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())
    return used, detail, len(pcm) / SR


# --------------------------------------------------------------------------- plan

def build_families(cat):
    """Class -> list of (family, weight). Fails loudly if any package content is missing."""
    P = cat.pkg
    fam = defaultdict(list)

    # ---- speech
    tux = P("tuxpaint-stamps-default")
    desc = need(find(tux, "usr/share/tuxpaint/stamps", r"_desc(_[a-z]{2})?\.ogg$"), "tuxpaint spoken descriptions", 1000)
    by_lang = defaultdict(list)
    for f in desc:
        lang = re.search(r"_desc(_[a-z]{2})?\.ogg$", f).group(1) or "_en"
        lang = lang[1:]
        by_lang["tuxpaint-stamps-default:speaker_%s" % lang].append(f)
    by_lang = {g: fs for g, fs in by_lang.items() if len(fs) >= 40}
    fam["speech"].append((ShortConcat("tuxpaint_desc", "tuxpaint-stamps-default", "speech", by_lang, cat, 7), 0.40))

    def fillets_groups(pkg, lang):
        root = P(pkg)
        fs = need(find(root, "usr/share/games/fillets-ng/sound", r"/%s/[^/]+\.ogg$" % lang), "%s dialogue" % pkg, 100)
        g = defaultdict(list)
        for f in fs:
            level = f.split(os.sep)[-3]
            g["%s:level_%s" % (pkg, level)].append(f)
        return g

    fam["speech"].append((ShortConcat("fillets_nl", "fillets-ng-data-nl", "speech",
                                      fillets_groups("fillets-ng-data-nl", "nl"), cat, 4), 0.25))
    fam["speech"].append((ShortConcat("fillets_en", "fillets-ng-data", "speech",
                                      fillets_groups("fillets-ng-data", "en"), cat, 4), 0.12))
    fam["speech"].append((Synth("espeak", "speech", "espeak", "espeak-ng"), 0.15))
    fam["speech"].append((Synth("flite", "speech", "flite", "flite"), 0.08))

    # ---- music
    def long_music(name, pkg, sub, rx, minimum, weight):
        fs = need(find(P(pkg), sub, rx), "%s music" % pkg, minimum)
        fam["music"].append((LongFiles(name, pkg, "music", fs, cat), weight))

    long_music("wesnoth", "wesnoth-1.16-music", "usr/share/games/wesnoth", r"\.ogg$", 30, 0.30)
    long_music("colobot", "colobot-common-sounds", "usr/share/games/colobot/music", r"\.ogg$", 15, 0.18)
    long_music("fretsonfire", "fretsonfire-songs-muldjord", "usr/share/games/fretsonfire", r"/song\.ogg$", 4, 0.12)
    long_music("fillets_music", "fillets-ng-data", "usr/share/games/fillets-ng/music", r"\.ogg$", 10, 0.12)
    long_music("frozen_bubble", "frozen-bubble-data", "usr/share/games/frozen-bubble/snd", r"zik.*\.ogg$", 3, 0.10)
    # ---- noise
    noise_real = need(find(tux, "usr/share/tuxpaint/stamps/household",
                           r"/(Washing-machine|kettle|toilet|vacuum_cleaner)\.ogg$"), "tuxpaint household noises", 4)
    fam["noise"].append((Synth("synth_noise", "noise", "noise"), 0.70))
    fam["noise"].append((LoopFiles("real_noise", "tuxpaint-stamps-default", "noise",
                                   sorted(noise_real), cat, crossfade=True), 0.30))

    # ---- alarm
    fd = P("sound-theme-freedesktop")
    al = need(find(fd, "usr/share/sounds/freedesktop",
                   r"/(alarm-clock-elapsed|phone-incoming-call|phone-outgoing-busy|phone-outgoing-calling|bell)\.oga$"),
              "freedesktop alarm sounds", 5)
    al += need(find(P("lomiri-sounds"), "usr/share/sounds/lomiri/notifications", r"/(A440|LowBattery)\.ogg$"),
               "lomiri alarm sounds", 2)
    al += need(find(tux, "usr/share/tuxpaint/stamps/vehicles", r"/firetruck\.ogg$"), "tuxpaint fire truck siren", 1)
    fam["alarm"].append((Synth("synth_alarm", "alarm", "alarm"), 0.65))
    fam["alarm"].append((LoopFiles("real_alarm", "freedesktop+lomiri+tuxpaint", "alarm",
                                   sorted(al), cat, gap=(0.03, 0.3)), 0.35))

    # ---- animal
    an = need(find(tux, "usr/share/tuxpaint/stamps/animals", r"/[^/]+\.ogg$"), "tuxpaint animal sounds", 50)
    an = [f for f in an if "_desc" not in os.path.basename(f)]
    fam["animal"].append((LoopFiles("tuxpaint_animals", "tuxpaint-stamps-default", "animal", sorted(an), cat,
                                    gap=(0.05, 0.4)), 1.0))

    # ---- silence / quiet
    fam["silence"].append((Synth("synth_quiet", "silence", "silence"), 0.75))
    quiet = LoopFiles("quiet_real", "tuxpaint-stamps-default", "silence",
                      sorted(noise_real), cat, crossfade=True)
    fam["silence"].append((quiet, 0.25))
    return fam


# Share of each class's clips (weights relative to the first version's families of that
# class, which sum to 1.0). The first version's synthesised noise and alarm shares are
# lowered to make room for the real recordings.
EXTRA_REWEIGHT = {("noise", "synth_noise"): 0.40, ("alarm", "synth_alarm"): 0.50,
                  ("animal", "tuxpaint_animals"): 0.55}


def pattern_row(r):
    """(package, directory, regex, minimum files) of a table row."""
    return (r["package"], r["directory"], r["regex"], int(r["minimum"]))


def train_only_table():
    """version -> class -> [(package, directory, regex, minimum files)] of
    versions/train_only.tsv (versions 3, 4, 5 and 7; version 6 is train_only_v6.tsv)."""
    out = {}
    for r in read_table("train_only.tsv"):
        out.setdefault(int(r["version"]), {}).setdefault(r["class"], []).append(pattern_row(r))
    return out


# version -> class -> [(package, directory, regex, minimum files)]; a version's train-only
# recordings are those of every table up to it (version 6 adds train_only_v6.tsv)
TRAIN_ONLY = train_only_table()
# version 4's train-only speech: one speaker's telephone prompts, a group per prompt set
TRAIN_ONLY4_SPEECH = TRAIN_ONLY[4]["speech"][0]


# Version 6 adds twenty-five more packages (FlightGear warning horns and beeps, telephone
# tones, bells, whistles; engines, weather, crowds; animals; music; spoken callouts), for
# training only, listed file by file in train_only_v6.tsv.
TRAIN_ONLY6_LIST = os.path.join(VERSIONS, "train_only_v6.tsv")


def train_only_v6(cat):
    """class -> [files] of train_only_v6.tsv; a listed file that is missing is an error."""
    out = defaultdict(list)
    with open(TRAIN_ONLY6_LIST, newline="") as f:
        rows = csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t")
        for r in rows:
            path = os.path.join(cat.pkg(r["package"]), r["path"])
            if not os.path.isfile(path):
                raise DataError("%s: %s of package %s is not extracted (%s)"
                                % (os.path.basename(TRAIN_ONLY6_LIST), r["path"], r["package"], path))
            if r["class"] not in CLASSES:
                raise DataError("%s: unknown class %r for %s" % (os.path.basename(TRAIN_ONLY6_LIST),
                                                                  r["class"], r["path"]))
            out[r["class"]].append(path)
    return out


def train_only_files(cat, version, label, v6):
    """Sorted train-only files of class label up to version (v6: train_only_v6()'s
    classes, or None to leave that list out), and their packages joined by '+'."""
    files = []
    for v in sorted(TRAIN_ONLY):
        for pkg, sub, rx, minimum in TRAIN_ONLY[v].get(label, []) if v <= version else []:
            files += need(find(cat.pkg(pkg), sub, rx), "%s %s recordings" % (pkg, label), minimum)
    if v6 is not None:
        files += v6[label]
    return sorted(files), "+".join(sorted({cat.rel(f).split(":")[0] for f in files}))


def speech_group(cat, f):
    """Train-only speech groups: asterisk's prompt sets (one speaker), else a package."""
    pkg, rel = cat.rel(f).split(":", 1)
    if pkg != TRAIN_ONLY4_SPEECH[0]:
        return pkg
    d = os.path.basename(os.path.dirname(rel))
    return "%s:%s" % (pkg, "prompts" if d == "en_US_f_Allison" else d)


def build_train_only_families(cat, version=3, use_v6_list=True):
    """Recordings used for training only (--train-extra): their groups never enter the test
    split, so the held-out test split stays version 2's. Labels come from file names that
    make the class unambiguous. version 4 adds its rows of versions/train_only.tsv (and
    music and speech), version 5 its rows, version 6 train_only_v6.tsv, version 7 its rows;
    use_v6_list=False leaves train_only_v6.tsv out of versions 6 and 7."""
    fam = defaultdict(list)
    v6 = train_only_v6(cat) if version >= 6 and use_v6_list else None
    for label, gap, crossfade in [("alarm", (0.03, 0.3), False), ("animal", (0.05, 0.4), False),
                                  ("noise", (0.05, 0.35), True)]:
        files, pkg = train_only_files(cat, version, label, v6)
        # as much weight as every other real family of the class together
        fam[label].append((LoopGroups("train_only_%s%d" % (label, version), pkg, label, files, cat,
                                      gap=gap, crossfade=crossfade), 1.0))
    if version >= 4:
        files, pkg = train_only_files(cat, version, "music", v6)
        fam["music"].append((LongFiles("train_only_music%d" % version, pkg, "music", files, cat), 1.0))
        files, pkg = train_only_files(cat, version, "speech", v6)
        by_group = defaultdict(list)
        for f in files:
            by_group[speech_group(cat, f)].append(f)
        fam["speech"].append((ShortConcat("train_only_speech%d" % version, pkg, "speech", dict(by_group),
                                          cat, 3), 0.5))
    return fam


def build_extra_families(cat):
    """Class -> list of (family, weight) of the families data set version 2 added
    (versions/v2_families.tsv, their recordings in versions/v2_recordings.tsv). They are
    planned after the first version's families, whose train/test split they leave unchanged
    (see main()). Fails loudly if any package content is missing."""
    files = defaultdict(list)
    for r in read_table("v2_recordings.tsv"):
        files[r["family"]] += need(find(cat.pkg(r["package"]), r["directory"], r["regex"]),
                                   r["what"], int(r["minimum"]))
    fam = defaultdict(list)
    for r in read_table("v2_families.tsv"):
        if r["kind"] == "long":
            f = LongFiles(r["family"], r["package"], r["class"], files[r["family"]], cat)
        elif r["kind"] == "loop":
            f = LoopGroups(r["family"], r["package"], r["class"], sorted(files[r["family"]]), cat,
                           gap=(float(r["gap_min"]), float(r["gap_max"])),
                           crossfade=r["crossfade"] == "1")
        else:
            raise DataError("v2_families.tsv: family %s: unknown kind %r" % (r["family"], r["kind"]))
        fam[r["class"]].append((f, float(r["weight"])))
    return fam


def split_counts(total, weights):
    """Integer counts proportional to weights that sum to total (largest remainder)."""
    w = np.array(weights, dtype=float)
    raw = w / w.sum() * total
    c = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - c))[: total - c.sum()]:
        c[i] += 1
    return [int(v) for v in c]


SPLIT_REFERENCE_PER_CLASS = 300


def clip_job(a, ci, c, fi, f, split, si, sp, seed_tag, name_tag="", group=None, **extra):
    """One clip to render: spec sp of family f (the fi-th of class c, the ci-th class), the
    si-th of its plan; seed_tag tells the plans apart in the clip's seed and name_tag in
    its file name."""
    if sp["kind"] == "loop" and f.name == "quiet_real":
        sp["kind"] = "quiet_real"
    rel = os.path.join("clips", split, c, "%s_%s_%s%04d.wav" % (c, f.name, name_tag, si))
    return dict(label=c, family=f.name, package=f.package, split=split, spec=sp,
                group=group or sp["group"], path=rel, path_abs=os.path.join(a.out, rel),
                seed=[a.seed, ci, fi, seed_tag, si], **extra)


def plan_jobs(fams, rng, split_of, per_class, a):
    """Plan per_class clips per class over fams (class -> [(family, weight)]). Groups not yet
    in split_of are split here (stratified per family, about test_frac of each family's
    groups in test; the first family to see a group decides); split_of is updated."""
    jobs = []
    for ci, c in enumerate(CLASSES):
        weights = [w for _, w in fams[c]]
        n_test_c = int(round(per_class * a.test_frac))
        counts = {"train": split_counts(per_class - n_test_c, weights),
                  "test": split_counts(n_test_c, weights)}
        for fi, (f, _) in enumerate(fams[c]):
            if f.groups is not None:
                undecided = [g for g in f.groups if g not in split_of]
                perm = [undecided[i] for i in rng.permutation(len(undecided))]
                decided = [g for g in f.groups if g in split_of]
                n_test_groups_total = max(1, int(round(len(f.groups) * a.test_frac)))
                already = sum(1 for g in decided if split_of[g] == "test")
                k = max(0, n_test_groups_total - already)
                for j, g in enumerate(perm):
                    split_of[g] = "test" if j < k else "train"
                if len(f.groups) >= 2 and not any(split_of[g] == "train" for g in f.groups):
                    raise DataError("family %s has no training group" % f.name)
            for split in ("train", "test"):
                n = counts[split][fi]
                if f.groups is None:
                    gs = None
                else:
                    gs = [g for g in f.groups if split_of[g] == split]
                specs = f.plan(gs, n, rng, a.clip_seconds)
                for si, sp in enumerate(specs):
                    group = sp.get("group") or "synth:%s:%s:%s%04d" % (c, f.name, split, si)
                    jobs.append(clip_job(a, ci, c, fi, f, split, si, sp,
                                         0 if split == "train" else 1, group=group))
    return jobs


def plan_extra_train(fams, rng, split_of, per_class, a):
    """per_class more training clips per class, cut from the real families' train groups
    only (fams: class -> [(family, weight)], synthesised families left out), planned with
    an RNG of their own so that the clips planned before them, and so the test split, do
    not change. Every group must be in split_of already. Rows from here are marked
    set=extra."""
    jobs = []
    for ci, c in enumerate(CLASSES):
        real = [(f, w) for f, w in fams[c] if f.groups is not None]
        if not real or per_class == 0:
            continue
        counts = split_counts(per_class, [w for _, w in real])
        for fi, ((f, _), n) in enumerate(zip(real, counts)):
            gs = [g for g in f.groups if split_of[g] == "train"]
            if not gs or n == 0:
                continue
            for si, sp in enumerate(f.plan(gs, n, rng, a.clip_seconds)):
                jobs.append(clip_job(a, ci, c, fi, f, "train", si, sp, 2, "x", set="extra"))
    return jobs


def plan_synth_music(n, a):
    """n training clips of synthesised music (synth_music.py: FluidSynth playing pieces
    composed at random), each its own group, marked set=extra like the other training-only
    clips (so the validation split is the same with or without them). Appended after every
    other clip with a seed tag of their own: the clips planned before them do not change."""
    ci = CLASSES.index("music")
    fam = Synth("synth_music", "music", "midi_music", "fluidsynth+fluid-soundfont-gm")
    return [clip_job(a, ci, "music", 0, fam, "train", si, Spec(kind="midi_music"), 4, "x",
                     group="synth:music:synth_music:train%04d" % si, set="extra")
            for si in range(n)]


# (the added tables, ADDED, and which a data set version holds: data_versions.py)
# the split of a table's clips, where not "train": split "valx" is a validation set that
# nothing trains on (its clips are set=valx; yamnet.py --val-extra measures them)
ADDED_SPLIT = {13: "valx"}
# speech of an added table: this many utterances a clip, a directory (one speaker) a group
ADDED_SPEECH_FILES = 4
# how a loop of each class is joined (as build_train_only_families does)
ADDED_LOOP = {"alarm": ((0.03, 0.3), False), "animal": ((0.05, 0.4), False),
              "noise": ((0.05, 0.35), True)}


def added_families(cat, version):
    """class -> family of ADDED[version]'s table: music cut from long files (a file is a
    group), speech joined from short utterances (a directory is a group), the other classes
    looped (a recording's takes are a group)."""
    rows = read_table(ADDED[version][0])
    split = ADDED_SPLIT.get(version, "train")
    prefix = "train_only" if split == "train" else "val_only"
    fams = {}
    for c in CLASSES:
        mine = [pattern_row(r) for r in rows if r["class"] == c]
        if not mine:
            continue
        files = []
        for pkg, sub, rx, minimum in mine:
            files += need(find(cat.pkg(pkg), sub, rx), "%s %s" % (pkg, c), minimum)
        name, pkgs = "%s_%s%d" % (prefix, c, version), "+".join(sorted({m[0] for m in mine}))
        if c == "music":
            fams[c] = LongFiles(name, pkgs, c, sorted(files), cat)
        elif c == "speech":
            by_dir = defaultdict(list)
            for f in sorted(files):
                by_dir[cat.rel(os.path.dirname(f))].append(f)
            fams[c] = ShortConcat(name, pkgs, c, dict(by_dir), cat, ADDED_SPEECH_FILES)
        elif c in ADDED_LOOP:
            gap, crossfade = ADDED_LOOP[c]
            fams[c] = LoopGroups(name, pkgs, c, sorted(files), cat, gap=gap, crossfade=crossfade)
        else:
            raise DataError("%s: class %r cannot be added (music, speech, %s)"
                            % (ADDED[version][0], c, ", ".join(sorted(ADDED_LOOP))))
    unknown = {r["class"] for r in rows} - set(CLASSES)
    if unknown:
        raise DataError("%s: unknown class %s" % (ADDED[version][0], ", ".join(sorted(unknown))))
    return fams


def plan_added(counts, version, cat, a):
    """counts[class] clips of each class of ADDED[version]'s recordings, marked added=version
    (their noise is never an alarm background): training clips (set=extra), or those of the
    table's own split ADDED_SPLIT (set = that split), which no training set ever holds."""
    fams = added_families(cat, version)
    stream = ADDED[version][1]
    split = ADDED_SPLIT.get(version, "train")
    mark = "extra" if split == "train" else split
    rng = np.random.default_rng([a.seed, stream])
    jobs = []
    for ci, c in enumerate(CLASSES):
        n = counts.get(c, 0)
        if n == 0:
            continue
        if c not in fams:
            raise DataError("%s has no %s recordings" % (ADDED[version][0], c))
        fam = fams[c]
        with ThreadPoolExecutor(a.jobs) as pool:
            fam.prepare(pool)
        jobs += [clip_job(a, ci, c, 0, fam, split, si, sp, stream, "x", set=mark, added=version)
                 for si, sp in enumerate(fam.plan(fam.groups, n, rng, a.clip_seconds))]
    return jobs


def validation_groups(jobs, frac, seed):
    """The train groups that conytrain/audio/recipe.py's carve_validation (same seed
    and share) holds out as its validation split; the same computation on the same rows."""
    rng = np.random.default_rng([seed, 7])
    fam = {}
    for j in jobs:
        if j["split"] == "train" and j.get("set") != "extra":
            fam.setdefault((j["label"], j["family"]), set()).add(j["group"])
    val = set()
    for key in sorted(fam):
        gs = sorted(fam[key])
        k = int(round(len(gs) * frac))
        if len(gs) < 3:
            k = 0
        for i in rng.permutation(len(gs))[:k]:
            val.add(gs[i])
    return val


def drop_families(jobs, families):
    """The planned clips less those of the named families (never rendered)."""
    keep = [j for j in jobs if j["family"] not in families]
    print("dropped %d planned clips of the families %s (MISLABELLED_FAMILIES)" %
          (len(jobs) - len(keep), ", ".join(families)))
    return keep


# the result of a clip hard-linked by --reuse (its manifest row is the old one)
REUSED = object()
REUSE_KEYS = ("path", "label", "split", "group", "family", "set")


def reuse_clips(jobs, old):
    """Hard-links the clips of @jobs that the data set @old holds under the same REUSE_KEYS
    (every clip is rendered from its own seed: the same plan gives the same bytes); returns
    path -> old manifest row of each."""
    man = os.path.join(old, "manifest.csv")
    if not os.path.isfile(man):
        raise DataError("--reuse %s: no manifest.csv there" % old)
    with open(man, newline="") as fh:
        have = {r["path"]: r for r in csv.DictReader(fh)}
    out = {}
    for j in jobs:
        r = have.get(j["path"])
        if r is None or any(r[k] != str(j.get(k, "base")) for k in REUSE_KEYS[1:]):
            continue
        os.makedirs(os.path.dirname(j["path_abs"]), exist_ok=True)
        os.link(os.path.join(old, r["path"]), j["path_abs"])
        out[j["path"]] = r
    print("reused %d of %d planned clips from %s" % (len(out), len(jobs), old))
    return out


def parse_args(argv=None):
    """The command line's arguments, with what --data-version sets (or the defaults without
    it) where not given."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="directory with one extracted tree per package")
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-class", type=int, help="clips per class (train+test): 120, or 400 "
                    "with --data-version")
    ap.add_argument("--test-frac", type=float, default=0.25)
    ap.add_argument("--clip-seconds", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--alarm-synth", choices=["v2", "v3"],
                    help="synthesised alarm generator: v2 (the data set version 2's; the default "
                         "without --data-version) or v3 (ringtones, "
                         "chimes, bells, many beep timbres, drifting sirens; speaker EQ, room reverb, "
                         "real background noise of the same split at 0-20 dB SNR)")
    ap.add_argument("--train-extra", type=int,
                    help="this many more training clips per class (set=extra in the manifest; "
                         "0, or 800 with --data-version), cut from the real train recordings and "
                         "the train-only recordings (build_train_only_families); the other clips, "
                         "the test split among them, stay the same")
    ap.add_argument("--train-only-version", type=int, choices=[3, 4, 5, 6, 7],
                    help="which train-only recordings --train-extra draws on: 3 (eight packages; "
                         "the default without --data-version), "
                         "4 (nineteen, with train-only music and speech), 5 (twenty-one), 6 "
                         "(forty-six: train_only_v6.tsv) or 7 (forty-nine: qabcs-data, "
                         "micropolis-data, minetest-mod-homedecor)")
    ap.add_argument("--without-v6-list", action="store_true",
                    help="with --train-only-version 6 or 7: leave out the recordings of "
                         "train_only_v6.tsv (data set version 10: version 5's tables and version 7's)")
    ap.add_argument("--keep-mislabelled", action="store_true",
                    help="keep the families of MISLABELLED_FAMILIES (fillets-ng's English sound "
                         "effects labelled speech), as data set versions 2-6 did")
    ap.add_argument("--synth-music", type=int, default=0,
                    help="this many more training clips of synthesised music (synth_music.py: "
                         "random pieces in ten styles played by fluidsynth, some overdriven or "
                         "band-limited); set=extra, the other clips stay the same")
    data_versions.add_argument(ap)
    ap.add_argument("--reuse", metavar="DIR",
                    help="a data set built before with the same seed: each planned clip that its "
                         "manifest holds with the same path, label, split, group, family and set "
                         "is hard-linked from it (every clip is rendered from its own seed, so the "
                         "bytes are the same) and its manifest row copied, instead of rendering it")
    ap.add_argument("--only-split", metavar="SPLIT,...",
                    help="render and list only the planned clips of these splits (e.g. "
                         "test,valx: the held-out clips alone, for measuring a model); the plan, "
                         "and so every rendered clip, is the full data set's")
    ap.add_argument("--val-frac", type=float, default=0.15,
                    help="v3 only: the training script's validation share; the noise recordings it "
                         "will hold out are not used as alarm backgrounds")
    a = ap.parse_args(argv)
    defaults = (data_versions.VERSION_9_ARGS if a.data_version is not None
                else data_versions.DEFAULT_ARGS)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


def main():
    a = parse_args()
    t0 = time.time()
    cat = Catalogue(a.src)
    fams = build_families(cat)
    extra = build_extra_families(cat)

    with ThreadPoolExecutor(a.jobs) as pool:
        for c in CLASSES:
            for f, _ in fams[c] + extra[c]:
                f.prepare(pool)

    # The first version's families keep the train/test split they had: it is decided by
    # planning them exactly as that version did (its own RNG sequence, SPLIT_REFERENCE_PER_CLASS
    # clips a class); the plan itself is thrown away. The clips are then planned with every
    # family; the added families' groups are split there (25 % test per family).
    split_of = {}
    plan_jobs(fams, np.random.default_rng(a.seed), split_of, SPLIT_REFERENCE_PER_CLASS, a)
    combined = {}
    for c in CLASSES:
        combined[c] = [(f, EXTRA_REWEIGHT.get((c, f.name), w)) for f, w in fams[c]] + extra[c]
    jobs = plan_jobs(combined, np.random.default_rng([a.seed, 2]), split_of, a.per_class, a)
    if a.train_extra:
        # more training clips of the same recordings, plus train-only recordings
        train_only = build_train_only_families(cat, a.train_only_version,
                                               use_v6_list=not a.without_v6_list)
        with ThreadPoolExecutor(a.jobs) as pool:
            for c in CLASSES:
                for f, _ in train_only[c]:
                    f.prepare(pool)
        for c in CLASSES:
            for f, _ in train_only[c]:
                for g in f.groups:
                    if split_of.get(g, "train") != "train":
                        raise DataError("train-only recording %s is in the test split" % g)
                    split_of[g] = "train"
        more = {c: combined[c] + train_only[c] for c in CLASSES}
        jobs += plan_extra_train(more, np.random.default_rng([a.seed, 3]), split_of, a.train_extra, a)
    if not a.keep_mislabelled:
        jobs = drop_families(jobs, MISLABELLED_FAMILIES)
    if a.synth_music:
        if not os.path.isfile(synth_music.SOUNDFONT):
            raise DataError("--synth-music needs the General MIDI sound font %s (Debian package "
                            "fluid-soundfont-gm)" % synth_music.SOUNDFONT)
        jobs += plan_synth_music(a.synth_music, a)
    # the added tables in table order (each its own RNG stream: the order only places their
    # rows)
    for table, counts in data_versions.added_tables(a.data_version):
        jobs += plan_added(counts, table, cat, a)
    if a.only_split:
        keep = set(a.only_split.split(","))
        print("--only-split %s: %d of %d planned clips" %
              (a.only_split, sum(j["split"] in keep for j in jobs), len(jobs)))
        jobs = [j for j in jobs if j["split"] in keep]
    clips_dir = os.path.join(a.out, "clips")
    if os.path.isdir(clips_dir):
        shutil.rmtree(clips_dir)
    reused = reuse_clips(jobs, a.reuse) if a.reuse else {}

    def render_or_reuse(j):
        if j["path"] in reused:
            return REUSED
        return render(j, a.clip_seconds, tmpdir)

    tmpdir = tempfile.mkdtemp(prefix="cony-data-")
    try:
        with ThreadPoolExecutor(a.jobs) as pool:
            if a.alarm_synth == "v2":
                results = list(pool.map(render_or_reuse, jobs))
            else:
                # everything else first; then the v3 alarms over the rendered real noise clips
                # of their own split (train: minus the groups the training script holds out)
                is_v3 = [j["label"] == "alarm" and j["spec"]["kind"] == "alarm" for j in jobs]
                first = [j for j, v in zip(jobs, is_v3) if not v]
                res1 = list(pool.map(render_or_reuse, first))
                val = validation_groups(jobs, a.val_frac, a.seed)
                bg = {"train": [], "test": []}
                for j, res in zip(first, res1):
                    # (not the added tables' noise: adding them leaves every alarm unchanged)
                    real = reused[j["path"]]["origin"] == "real" if res is REUSED else res[0]
                    if j["label"] == "noise" and real and j["group"] not in val and not j.get("added"):
                        bg[j["split"]].append(j["path_abs"])
                second = [j for j, v in zip(jobs, is_v3) if v]
                for j in second:
                    j["alarm_synth"] = "v3"
                    j["bg_files"] = sorted(bg[j["split"]])
                res2 = list(pool.map(render_or_reuse, second))
                it1, it2 = iter(res1), iter(res2)
                results = [next(it2) if v else next(it1) for v in is_v3]
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    rows = []
    for j, res in zip(jobs, results):
        if res is REUSED:
            rows.append(reused[j["path"]])
            continue
        used, detail, dur = res
        src = ";".join(cat.rel(u) for u in used) if used else "%s (%s)" % (j["group"], detail)
        rows.append(dict(path=j["path"], label=j["label"], source_file=src, split=j["split"],
                         duration="%.3f" % dur, origin="real" if used else "synth",
                         package="+".join(sorted({cat.rel(u).split(":")[0] for u in used})) or j["package"], group=j["group"], family=j["family"], detail=detail,
                         set=j.get("set", "base")))

    # leakage check: every source file and group in exactly one split
    where = defaultdict(set)
    for r in rows:
        for s in r["source_file"].split(";"):
            where[s].add(r["split"])
        where["group " + r["group"]].add(r["split"])
    leaks = [s for s, v in where.items() if len(v) > 1]
    if leaks:
        raise DataError("split leakage for %d sources, e.g. %s" % (len(leaks), leaks[:3]))

    man = os.path.join(a.out, "manifest.csv")
    with open(man, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["path", "label", "source_file", "split", "duration",
                                           "origin", "package", "group", "family", "detail", "set"])
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(a.out, "labels.txt"), "w") as fh:
        fh.write("\n".join(CLASSES) + "\n")

    # balance report
    cnt = Counter((r["label"], r["split"], r["origin"]) for r in rows)
    ngroups = defaultdict(set)
    for r in rows:
        ngroups[(r["label"], r["split"])].add(r["group"])
    size = sum(os.path.getsize(os.path.join(a.out, r["path"])) for r in rows)
    print("\nbalance report (%d clips of %.1f s, %.1f MB, %.0f s)" %
          (len(rows), a.clip_seconds, size / 1e6, time.time() - t0))
    print("%-8s %11s %11s %11s %11s   %s" % ("class", "train real", "train synth", "test real", "test synth",
                                             "groups train/test"))
    for c in CLASSES:
        print("%-8s %11d %11d %11d %11d   %d/%d" % (
            c, cnt[(c, "train", "real")], cnt[(c, "train", "synth")], cnt[(c, "test", "real")],
            cnt[(c, "test", "synth")], len(ngroups[(c, "train")]), len(ngroups[(c, "test")])))
    tot = Counter((r["split"]) for r in rows)
    print("total    train %d, test %d; no source file or group in both splits" % (tot["train"], tot["test"]))
    if tot["valx"]:
        print("validation only (split valx): %d clips, %d groups" %
              (tot["valx"], len({r["group"] for r in rows if r["split"] == "valx"})))
    print("manifest: %s" % man)


def cli():
    """main(), a DataError reported in one line with exit status 1."""
    try:
        main()
    except DataError as e:
        print("build_audio_dataset: error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    cli()
