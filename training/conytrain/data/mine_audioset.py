"""Scores sound files with YAMNet's own AudioSet classes, to find candidate alarm and animal
recordings in Debian packages (issue 44, rule 33 of models/audio/EXPERIMENTS.md):

  training/mine_audioset.py --cony build/tools/cony [--model models/yamnet/yamnet.safetensors]
                   [--threshold 0.5] [--jobs 2] --out scores.tsv FILE|DIR...

Each file is decoded by sox to 16 kHz mono and tagged by `cony tag` (every AudioSet score of
every 0.96 s window, stride 0.48 s). A group's window score is the largest score of the
group's AudioSet classes (ALARM, ANIMAL below); a file's group score is the mean of that
over its windows. A file is a candidate of a group when that score is at least --threshold
(fixed before the files were scored: 0.5) and above the other group's and above the mean
Speech and Music scores. The TSV lists every file (path, windows, alarm, animal, speech,
music, top three AudioSet classes of the mean, candidate); a candidate is only that: it is
checked against its file name and its package's description before any use.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from conytrain import REPO

SOUND = (".wav", ".ogg", ".oga", ".flac")

# AudioSet classes (YAMNet's labels) that name an alarm-type sound: alarms, sirens,
# telephone rings, buzzers, beeps, doorbells. Not bells, chimes or horns in general (music
# and traffic share them).
ALARM = ("Alarm", "Telephone", "Telephone bell ringing", "Ringtone", "Busy signal",
         "Alarm clock", "Siren", "Civil defense siren", "Buzzer", "Smoke detector, smoke alarm",
         "Fire alarm", "Car alarm", "Reversing beeps", "Police car (siren)", "Ambulance (siren)",
         "Fire engine, fire truck (siren)", "Doorbell", "Ding-dong", "Beep, bleep")
# AudioSet's animal subtree (Animal .. Whale vocalization) less the sounds that are not
# calls or that noise shares: hooves, wings, patter, buzz, rattle, hiss, cowbell.
ANIMAL_NOT = ("Clip-clop", "Cowbell", "Hiss", "Bird flight, flapping wings", "Patter", "Buzz",
              "Rattle")


class MineError(Exception):
    pass


def read_labels(path):
    """The display names of labels.csv (index,mid,display_name), in index order."""
    import csv
    with open(path, newline="") as fh:
        return [r["display_name"] for r in csv.DictReader(fh)]


def groups(labels):
    """Indices of the alarm and animal groups in @labels (every name must be there)."""
    def idx(name):
        if name not in labels:
            raise MineError("AudioSet class %r is not among YAMNet's labels" % name)
        return labels.index(name)
    alarm = [idx(n) for n in ALARM]
    first, last = idx("Animal"), idx("Whale vocalization")
    animal = [i for i in range(first, last + 1) if labels[i] not in ANIMAL_NOT]
    return alarm, animal


def parse_tag(text, labels):
    """Windows x classes scores from `cony tag --top-k N` output (label score pairs)."""
    pos = {n: i for i, n in enumerate(labels)}
    rows = []
    for line in text.splitlines():
        parts = line.split("\t")[2:]
        s = np.zeros(len(labels), np.float32)
        for p in parts:
            name, _, val = p.rpartition(" ")
            s[pos[name]] = float(val)
        rows.append(s)
    # (none for a file shorter than one window: never a candidate)
    return np.stack(rows) if rows else np.zeros((0, len(labels)), np.float32)


def score_file(path, cony, model, labels, tmpdir):
    wav = os.path.join(tmpdir, "%d-%s.wav" % (os.getpid(), abs(hash(path))))
    r = subprocess.run(["sox", path, "-r", "16000", "-c", "1", "-b", "16", wav],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise MineError("sox cannot decode %s: %s" % (path, r.stderr.strip()[:200]))
    try:
        r = subprocess.run([cony, "tag", "--model", model, "--top-k", str(len(labels)), wav],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise MineError("cony tag %s: %s" % (path, r.stderr.strip()[:200]))
        return parse_tag(r.stdout, labels)
    finally:
        os.unlink(wav)


def summarise(scores, labels, alarm, animal, threshold):
    """One row of the TSV for a file's windows x classes @scores."""
    if len(scores) == 0:
        return dict(windows=0, alarm=0.0, animal=0.0, speech=0.0, music=0.0, top="",
                    candidate="")
    a = float(scores[:, alarm].max(1).mean())
    n = float(scores[:, animal].max(1).mean())
    mean = scores.mean(0)
    sp, mu = float(mean[labels.index("Speech")]), float(mean[labels.index("Music")])
    cand = ""
    if a >= threshold and a > n and a > sp and a > mu:
        cand = "alarm"
    elif n >= threshold and n > a and n > sp and n > mu:
        cand = "animal"
    top = ", ".join("%s %.2f" % (labels[i], mean[i]) for i in np.argsort(-mean)[:3])
    return dict(windows=len(scores), alarm=a, animal=n, speech=sp, music=mu, top=top,
                candidate=cand)


def find_files(args):
    out = []
    for p in args:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                # (os.path.isfile: not a dangling link)
                out += [os.path.join(root, f) for f in names if f.lower().endswith(SOUND)
                        and os.path.isfile(os.path.join(root, f))]
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise MineError("%s: no such file or directory" % p)
    return sorted(out)


def run(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cony", default=os.path.join(REPO, "build", "tools", "cony"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"))
    ap.add_argument("--labels", default=os.path.join(REPO, "models", "yamnet", "labels.csv"))
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args(argv)
    labels = read_labels(a.labels)
    alarm, animal = groups(labels)
    files = find_files(a.paths)
    if not files:
        raise MineError("no sound files (%s) under %s" % (", ".join(SOUND), " ".join(a.paths)))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(a.jobs) as pool:
        res = list(pool.map(lambda f: score_file(f, a.cony, a.model, labels, tmp), files))
    with open(a.out, "w") as fh:
        fh.write("path\twindows\talarm\tanimal\tspeech\tmusic\ttop\tcandidate\n")
        for f, s in zip(files, res):
            r = summarise(s, labels, alarm, animal, a.threshold)
            fh.write("%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\n" % (
                f, r["windows"], r["alarm"], r["animal"], r["speech"], r["music"], r["top"],
                r["candidate"]))
    n = sum(1 for line in open(a.out) if line.rstrip().endswith(("\talarm", "\tanimal")))
    print("%d files scored, %d candidates -> %s" % (len(files), n, a.out))


def main(argv=None):
    """run() with a clear error (exit status 1) for bad input instead of a traceback."""
    try:
        run(argv)
    except MineError as e:
        print("mine_audioset: error: %s" % e, file=sys.stderr)
        return 1
    return 0
