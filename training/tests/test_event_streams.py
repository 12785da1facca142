"""Event streams (training/synth_events.py, conytrain.data.event_streams; rule 30, issue 44):
the energy detector cuts single events, the clips repeat them over other classes' sound with
the documented manifest rows, a missing class is refused by name, and train_yamnet_audio.py
--events draws its sources only from train clips outside the validation recordings and adds
the clips to the train split only."""

import argparse
import csv
import os
import unittest
from unittest import mock

import numpy as np

from conytrain.audio import yamnet
from conytrain.data import event_streams as ev
from conytrain.data.synth_tones import write_wav
import test_val_only as base

SR = 16000


def beeps(n, on=0.1, period=0.5, f=2000.0):
    t = np.arange(n) / SR
    return 0.3 * np.sin(2 * np.pi * f * t) * (np.mod(t, period) < on)


def write_sources(root, classes, per=2):
    rows = []
    rng = np.random.default_rng(1)
    for c in classes:
        for i in range(per):
            x = beeps(5 * SR) if c in ev.EVENT_CLASSES else 0.05 * rng.standard_normal(5 * SR)
            path = "%s%d.wav" % (c, i)
            write_wav(os.path.join(root, path), x)
            rows.append([root, path, c, "%s-g%d" % (c, i), "pkg:%s" % path])
    out = os.path.join(root, "sources.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["root", "path", "label", "group", "source_file"])
        w.writerows(rows)
    return out


class EventStreams(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_detector_cuts_one_beep(self):
        x = beeps(5 * SR)
        runs = ev.active_runs(x)
        self.assertEqual(len(runs), 10)                     # one a 0.5 s period
        for a, b in runs:
            self.assertAlmostEqual((b - a) / SR, 0.1, delta=0.03)
        e, how = ev.cut_event(x, np.random.default_rng(0))
        self.assertTrue(how.startswith("detected"))
        self.assertAlmostEqual(len(e) / SR, 0.1, delta=0.03)
        # a sound with no gaps has no event of 60 ms to 1.5 s: a stretch of it instead
        e, how = ev.cut_event(0.1 * np.ones(5 * SR), np.random.default_rng(0))
        self.assertTrue(how.startswith("stretch"))
        self.assertTrue(0.15 * SR <= len(e) <= 1.0 * SR)

    def test_repeat_hears_an_event_in_every_window(self):
        rng = np.random.default_rng(3)
        for _ in range(20):
            y, note = ev.repeat(np.ones(int(0.1 * SR)), 5 * SR, rng)
            gap = float(note.split()[1])
            self.assertTrue(0.05 <= gap <= 0.8)
            # every 0.96 s window after the first second holds an event
            for s in range(SR, 4 * SR, SR // 4):
                self.assertGreater(np.abs(y[s:s + int(0.96 * SR)]).max(), 0)

    def test_clips_and_manifest(self):
        src = write_sources(self.tmp.name, ev.EVENT_CLASSES + ev.BACKGROUNDS)
        out = os.path.join(self.tmp.name, "out")
        ev.main([out, "--sources", src, "--per-class", "3", "--seed", "5"])
        with open(os.path.join(out, "manifest.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["label"] for r in rows], ["alarm"] * 3 + ["animal"] * 3)
        for r in rows:
            self.assertEqual((r["split"], r["set"], r["origin"]), ("train", "events", "mix"))
            self.assertTrue(r["group"].startswith("events:%s-g" % r["label"]))
            x = ev.read_wav(os.path.join(out, r["path"]))
            self.assertEqual(len(x), 5 * SR)
            level = 20 * np.log10(np.sqrt(np.mean(x ** 2)))
            self.assertTrue(-35 < level < -13, level)
        # the same seed makes the same clips
        again = os.path.join(self.tmp.name, "again")
        ev.main([again, "--sources", src, "--per-class", "3", "--seed", "5"])
        for r in rows:
            with open(os.path.join(out, r["path"]), "rb") as a, \
                    open(os.path.join(again, r["path"]), "rb") as b:
                self.assertEqual(a.read(), b.read())

    def test_missing_class_named(self):
        src = write_sources(self.tmp.name, ("alarm", "animal", "speech", "music"))
        with self.assertRaisesRegex(ValueError, "noise"):
            ev.read_sources(src)


class EventsStage(unittest.TestCase):
    """test_val_only's small data set: --events writes the sources from the train clips left
    after the validation recordings (never a test or valx clip) and adds its clips to the
    train split only."""
    setUp = base.YamnetValidationOnly.setUp
    tearDown = base.YamnetValidationOnly.tearDown

    def test_sources_and_rows(self):
        args = argparse.Namespace(**dict(vars(self.args), events=2, events_seed=44))
        made = {}

        def fake_run(cmd):
            made["cmd"] = cmd
            out = cmd[2]
            base.write_manifest(out, [dict(base.row(k, c, "train", "events:x", "events_" + c,
                                                    "events"), path="clips/train/%s/e%d.wav"
                                           % (c, k)) for k, c in enumerate(("alarm", "animal"))])

        with mock.patch.object(yamnet, "run", fake_run):
            yamnet.stage_events(args)
        self.assertEqual(made["cmd"][3:], ["--sources", os.path.join(yamnet.events_dir(args),
                                                                     "sources.csv"),
                                           "--per-class", "2", "--seed", "44"])
        with open(os.path.join(yamnet.events_dir(args), "sources.csv"), newline="") as f:
            groups = {r["group"] for r in csv.DictReader(f)}
        rows, _ = yamnet.load_rows(args)
        held_out = {r["group"] for r in rows if r["split"] in ("val", "valx", "test")}
        name = os.path.basename(self.dataset)
        train = {r["group"] for r in rows if r["split"] == "train" and r["set"] == name}
        self.assertTrue(held_out)
        self.assertEqual(groups, train)
        events = [r for r in rows if r["set"] == os.path.basename(yamnet.events_dir(args))]
        self.assertEqual(len(events), 2)
        self.assertEqual({r["split"] for r in events}, {"train"})


if __name__ == "__main__":
    unittest.main()
