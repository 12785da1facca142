"""The fused model's continual audio tokens (models/av/EXPERIMENTS.md, rule 14): each fused
step gets the token conyfuse joins at run time (the newest whose PTS is at or before the
step's time), only tokens whose receptive field lies inside their clip are kept (checked
against `cony embed --mode continual`: they do not change with the neighbouring clips, and
the next ones out do), and a model trained on them records `cnn_mode: continual`, which
its export and libcony's loader keep."""

import argparse
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from conytrain import REPO, safetensors_io
from conytrain.av import build, media
from conytrain.av import train as avtrain
from conytrain.export import export_model

YAMNET = os.path.join(REPO, "models", "yamnet", "yamnet.safetensors")
MOBILENET = os.path.join(REPO, "models", "imagenet", "mobilenet_v2.safetensors")
CLIP = int(media.CLIP_S * media.RATE)


def cony_tool():
    root = os.environ.get("CONY_BUILD_ROOT", os.path.join(REPO, "build"))
    path = os.path.join(root, "tools", "cony")
    return path if os.access(path, os.X_OK) else None


def newest_at_or_before(t_ns, pts_ns):
    """conyfuse's join: the index of the newest token whose PTS is at or before t."""
    return int(np.searchsorted(pts_ns, t_ns, side="right")) - 1


class StepTest(unittest.TestCase):
    def test_steps_get_the_token_conyfuse_joins(self):
        # a stream of three clips from t = 0: steps every 0.25 s, continual tokens every
        # 32 frames of 10 ms; the middle clip's steps as build.continual_steps says
        clips, hop_ns = 3, build.CONTINUAL_HOP * 10_000_000
        per_clip_steps = int(media.CLIP_S * media.STEP_HZ)
        per_clip_tokens = int(media.CLIP_S * 1e9) // hop_ns
        pts = np.arange(clips * per_clip_tokens, dtype=np.int64) * hop_ns
        steps, tokens = build.continual_steps(CLIP)
        self.assertEqual(len(steps), 18)
        for i, j in zip(steps, tokens):
            s = per_clip_steps + int(i)
            t = s * 1_000_000_000 // media.STEP_HZ
            self.assertEqual(newest_at_or_before(t, pts), per_clip_tokens + int(j))
        self.assertTrue((np.diff(tokens) >= 0).all() and (np.diff(steps) == 1).all())

    def test_kept_steps_read_only_their_clip(self):
        # every step of a clip is kept exactly when its token's receptive field (frames
        # hop·j − 126 .. hop·j + 252, each 400 samples from its start) lies in the clip
        steps, tokens = build.continual_steps(CLIP)
        kept = dict(zip(steps.tolist(), tokens.tolist()))
        for i in range(int(media.CLIP_S * media.STEP_HZ)):
            j = i * 25 // build.CONTINUAL_HOP
            lo = (build.CONTINUAL_HOP * j - 126) * 160
            hi = (build.CONTINUAL_HOP * j + 96 + 157 - 1) * 160 + 400
            self.assertEqual(i in kept, lo >= 0 and hi <= CLIP, f"step {i} (token {j})")
            if i in kept:
                self.assertEqual(kept[i], j)

    def test_refuses_clips_of_partial_tokens(self):
        with self.assertRaises(ValueError):
            build.continual_steps(CLIP + 160)


def clip(rng):
    t = np.arange(CLIP) / media.RATE
    am = np.sin(2 * np.pi * rng.uniform(0.5, 3) * t) ** 2
    x = 0.1 * rng.standard_normal(CLIP) * am + 0.2 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t)
    return x.astype(np.float32)


@unittest.skipIf(cony_tool() is None, "no built cony (CONY_BUILD_ROOT)")
class InteriorTest(unittest.TestCase):
    def test_interior_tokens_do_not_read_the_neighbours(self):
        rng = np.random.default_rng(1)
        middle = clip(rng)
        first, last = build.continual_interior(CLIP)
        self.assertEqual((first, last), (4, 17))
        steps = []
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(2):    # the same middle clip between other neighbours
                clips = [("noise", "g", c) for c in (clip(rng), middle, clip(rng))]
                steps.append(build.embed_audio_continual(clips, cony_tool(), YAMNET, tmp, f"t{k}"))
            self.assertEqual(sorted(os.listdir(tmp)), ["audio-t0.continual.npy",
                                                      "audio-t1.continual.npy"])
            raw = [np.load(os.path.join(tmp, f"audio-t{k}.continual.npy")) for k in range(2)]
        self.assertEqual(steps[0].shape, (3, 18, 1024))
        np.testing.assert_array_equal(steps[0][1], steps[1][1])
        self.assertGreater(np.abs(steps[0][0] - steps[1][0]).max(), 0.01)
        per_clip = CLIP // 160 // build.CONTINUAL_HOP
        _, tokens = build.continual_steps(CLIP)
        np.testing.assert_array_equal(steps[0][1], raw[0][per_clip + tokens])
        # the bounds are tight: the tokens just outside them read the neighbours
        for j in (first - 1, last + 1):
            self.assertGreater(np.abs(raw[0][per_clip + j] - raw[1][per_clip + j]).max(), 0)


def model_args(mode):
    return argparse.Namespace(audio_cnn=YAMNET, video_cnn=MOBILENET, audio_mode=mode,
                              train_seed=1, d=16, heads=2, ff=32, window=4, landmarks=2,
                              dropout=0.0)


class ConfigTest(unittest.TestCase):
    def test_continual_model_records_its_mode(self):
        model = avtrain.make_model(("audio", "video"), model_args("continual"))
        audio, video = model.config["fusion"]["inputs"]
        self.assertEqual((audio["cnn_mode"], audio["rate"]), ("continual", [25, 8]))
        self.assertNotIn("cnn_mode", video)
        window = avtrain.make_model(("audio",), model_args("window"))
        self.assertNotIn("cnn_mode", window.config["fusion"]["inputs"][0])
        self.assertEqual(window.config["fusion"]["inputs"][0]["rate"], [4, 1])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.safetensors")
            export_model(model.eval(), path)
            _, meta = safetensors_io.load(path)
            inputs = json.loads(meta["config"])["fusion"]["inputs"]
            self.assertEqual(inputs[0]["cnn_mode"], "continual")
            if cony_tool():   # libcony loads it and runs it
                x, y = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
                np.save(x, np.zeros((3, 1024 + 1280 + 2), np.float32))
                subprocess.run([cony_tool(), "classify", "-m", path, "-o", y, x], check=True,
                               stdout=subprocess.DEVNULL)
                self.assertEqual(np.load(y).shape, (3, 5))


class EvalRowsTest(unittest.TestCase):
    def test_only_the_given_models_rows(self):
        lab = np.array([0, 1, 2, 3, 4, 0])

        class Path:
            def tops(self, model, streams, senses):
                return lab if model == "right" else np.zeros_like(lab)

        streams = [({}, lab)]
        out = avtrain.evaluate({"fused": "right", "audio": "wrong"}, streams, Path())
        self.assertEqual(set(out["per class"]), {"fused, both senses", "fused, audio only",
                                                 "fused, video only", "audio model"})
        self.assertEqual(out["fused, both senses"], 1.0)
        self.assertAlmostEqual(out["audio model"], 2 / 6)


if __name__ == "__main__":
    unittest.main()
