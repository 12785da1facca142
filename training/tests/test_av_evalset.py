"""Issue 54's evaluation set and rule 11's degraded training sounds (conytrain/av/evalset.py,
build.degrade_random, SceneSampler's p_degraded): each condition does what its name says,
every cell of the grid shares one draw of scenes (only the sound's condition and the
picture differ), matched pictures are of the sound's class and unrelated ones never are,
and the sampler takes degraded sounds only when asked."""

import os
import unittest

import numpy as np

from conytrain import REPO
from conytrain.av import build, evalset, media, sources
from conytrain.av import train as avtrain


def tone(n=16000):
    t = np.arange(n) / media.RATE
    return (0.1 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def fake_set(rng, clips=15, shots=15):
    """Tokens whose first value is the class id and second the condition's index."""
    conds = len(evalset.CONDITIONS)
    a = rng.random((conds, clips, 29, 6)).astype(np.float32)
    a[:, :, :, 0] = (np.arange(clips) % 5)[None, :, None]
    a[:, :, :, 1] = np.arange(conds)[:, None, None]
    v = rng.random((shots, 16, 4)).astype(np.float32)
    v[:, :, 0] = (np.arange(shots) % 5)[:, None]
    cls = lambda n: np.array([sources.CLASSES[i % 5] for i in range(n)])
    return dict(audio=a, audio_cls=cls(clips), video=v, video_cls=cls(shots))


class DegradeTest(unittest.TestCase):
    def test_conditions(self):
        x, rng = tone(), np.random.default_rng(0)
        self.assertIs(evalset.degrade(x, "clean", rng), x)
        for snr in (20, 0, -5):
            y = evalset.degrade(x, f"snr{snr}", rng)
            self.assertAlmostEqual(media.rms_db(x) - media.rms_db(y - x), snr, delta=0.1)
        self.assertAlmostEqual(media.rms_db(evalset.degrade(x, "level-25", rng)),
                               media.rms_db(x) - 25, delta=0.01)
        y = evalset.degrade(x, "clipped", rng)
        self.assertAlmostEqual(float(np.abs(y).max()), 0.5, places=6)
        with self.assertRaises(ValueError):
            evalset.degrade(x, "snr", rng)

    def test_training_degradations_stay_in_range(self):
        rng = np.random.default_rng(1)
        changed = 0
        for _ in range(30):
            y = build.degrade_random(tone(), rng)
            self.assertTrue(np.all(np.isfinite(y)) and np.abs(y).max() <= 1)
            changed += not np.allclose(y, tone())
        self.assertEqual(changed, 30)


class DegradeSplitTest(unittest.TestCase):
    """Rule 16: the degraded copies are embedded as the work's clean tokens were (per
    window or continual), from the same seeded draws, and copies of another shape are
    refused."""

    def run_split(self, mode, steps):
        import tempfile
        from unittest import mock
        clips = [("music", f"g{i}", tone() * (i + 1)) for i in range(3)]
        seen = {}

        def embed(kind):
            def f(cl, cony, cnn, work, split):
                seen.setdefault(kind, []).append([float(np.abs(x).sum()) for _, _, x in cl])
                return np.zeros((len(cl), steps, 4), np.float32)
            return f
        with tempfile.TemporaryDirectory() as work, \
                mock.patch.object(build.sources, "collect", return_value=[]), \
                mock.patch.object(build, "sound_clips", return_value=clips), \
                mock.patch.object(build, "embed_audio", embed("window")), \
                mock.patch.object(build, "embed_audio_continual", embed("continual")):
            np.savez(os.path.join(work, "tokens-train.npz"), audio=np.zeros((3, 5, 4), np.float32),
                     audio_cls=np.array(["music"] * 3), audio_group=np.array(["g0", "g1", "g2"]))
            build.degrade_split("root", work, "cony", "cnn", 7, "train", mode)
            z = np.load(os.path.join(work, "tokens-train-degraded.npz"))
            return seen, z["audio"].shape

    def test_mode_chooses_the_embedding(self):
        window, shape = self.run_split("window", 5)
        self.assertEqual(list(window), ["window"])
        self.assertEqual(shape, (build.DEGRADED_COPIES, 3, 5, 4))
        continual, _ = self.run_split("continual", 5)
        self.assertEqual(list(continual), ["continual"])
        self.assertEqual(continual["continual"], window["window"])   # the same draws

    def test_other_shapes_are_refused(self):
        with self.assertRaisesRegex(RuntimeError, "not the clean ones"):
            self.run_split("continual", 6)


class ValDegradedTest(unittest.TestCase):
    """Rule 17's --eval-split val-degraded: val's video and labels, every degraded copy of
    a val clip a clip of its own; copies of another shape are refused."""

    def test_copies_become_clips(self):
        import tempfile
        from conytrain.av.cli import eval_data
        with tempfile.TemporaryDirectory() as work:
            audio = np.arange(3 * 2 * 1, dtype=np.float32).reshape(3, 2, 1)
            np.savez(os.path.join(work, "tokens-val.npz"), audio=audio,
                     audio_cls=np.array(["music", "animal", "quiet"]),
                     audio_group=np.array(["a", "b", "c"]), video=np.zeros((2, 4, 3), np.float32),
                     video_cls=np.array(["music", "quiet"]), video_group=np.array(["p", "q"]))
            copies = np.stack([audio + 100, audio + 200])
            np.savez(os.path.join(work, "tokens-val-degraded.npz"), audio=copies)
            d = eval_data(work, "val-degraded")
            self.assertEqual(d["audio"].shape, (6, 2, 1))
            self.assertTrue(np.array_equal(d["audio"][4], audio[1] + 200))
            self.assertEqual(list(d["audio_cls"]), ["music", "animal", "quiet"] * 2)
            self.assertEqual(d["video"].shape, (2, 4, 3))
            self.assertTrue(np.array_equal(eval_data(work, "val")["audio"], audio))
            np.savez(os.path.join(work, "tokens-val-degraded.npz"), audio=copies[:, :2])
            with self.assertRaises(SystemExit):
                eval_data(work, "val-degraded")


class BoundedChoiceTest(unittest.TestCase):
    """Rule 15's val rows (conytrain/av/bounded.py): limit 0 is the audio model (every row
    0 points), a wide limit the fused model; the choice takes the largest margin."""

    def test_rows_and_choice(self):
        import torch
        from conytrain.av import bounded
        y = torch.tensor([0, 1, 2, 3, 4] * 4)
        za = torch.nn.functional.one_hot(y, 5).double() * 0.2      # right, barely
        zf = za.clone()
        zf[:5] = torch.nn.functional.one_hot((y[:5] + 1) % 5, 5).double() * 9   # wrong, sure
        cells = {(s, p): (za, zf, y) for s in ("clean", "degraded") for p in ("matched", "unrelated")}
        u, rows = bounded.val_rows(cells, 0.0)
        self.assertEqual((u, set(rows.values())), (0.0, {0.0}))
        u, rows = bounded.val_rows(cells, 20.0)
        self.assertAlmostEqual(u, -25.0)
        self.assertAlmostEqual(rows["clean", "matched"], -25.0)
        self.assertEqual(bounded.choose(cells, lambda m: None, (0.0, 20.0)), 0.0)


class GridTest(unittest.TestCase):
    def test_cells_share_one_draw(self):
        data = fake_set(np.random.default_rng(2))
        streams = evalset.scenes(data, 3, 50, seed=5)
        cells = {(c, p): evalset.tokens(data, streams, c, p)
                 for c in ("clean", "snr0") for p in evalset.PICTURES}
        ref = cells["clean", "matched"]
        for (c, p), st in cells.items():
            for (tok, lab), (tok0, lab0) in zip(st, ref):
                self.assertEqual(len(lab), 50)
                np.testing.assert_array_equal(lab, lab0)
                np.testing.assert_array_equal(tok["audio"][:, 0], lab)       # sound = truth
                self.assertTrue(np.all(tok["audio"][:, 1] == evalset.CONDITIONS.index(c)))
                vc = tok["video"][:, 0]
                if p == "unrelated":
                    self.assertTrue(np.all(vc != lab))
                else:
                    np.testing.assert_array_equal(vc, lab)

    def test_scenes_fit_short_clips(self):
        # rule 20's val cells: continual caches hold 18 steps a clip, fewer than a
        # scene's longest (24)
        data = fake_set(np.random.default_rng(2))
        data["audio"] = data["audio"][:, :, :18]
        streams = evalset.scenes(data, 4, 96, seed=5)
        lengths = [L for _, plan in streams for _, L, *_ in plan]
        self.assertIn(18, lengths)
        self.assertTrue(all(t0 + L <= 18 for _, plan in streams for _, L, _, t0, _, _ in plan))
        for tok, lab in evalset.tokens(data, streams, "clean", "matched"):
            self.assertEqual(len(lab), 96)
            np.testing.assert_array_equal(tok["audio"][:, 0], lab)


class ContinualGridTest(unittest.TestCase):
    """A continual model's grid (rule 14's models): each stream's sound is its scenes'
    clips from their steps, and each step gets the token conyfuse joins."""

    def test_stream_sound_is_the_scenes_clips(self):
        step = media.RATE // media.STEP_HZ
        clips = [("music", "g", np.arange(32 * step, dtype=np.float32) + 1e6 * k)
                 for k in range(3)]
        plan = [(1, 5, 2, 3, [], []), (1, 2, 0, 0, [], [])]
        x = evalset.stream_sound(plan, clips)
        np.testing.assert_array_equal(x, np.concatenate([clips[2][2][3 * step:8 * step],
                                                         clips[0][2][:2 * step]]))

    def test_steps_join_the_newest_token_at_or_before(self):
        hop_ms, step_ms = 10 * build.CONTINUAL_HOP, 1000 // media.STEP_HZ
        for steps, tokens in ((96, 75), (97, 76), (40, 31)):
            j = evalset.stream_token_index(steps, tokens)
            for s in range(steps):   # the token of PTS hop_ms·j at or before s·step_ms
                want = min((s * step_ms) // hop_ms, tokens - 1)
                self.assertEqual(j[s], want, f"step {s} of {steps}")
        self.assertEqual(evalset.stream_token_index(96, 75)[-1], 74)   # EOS: the newest
        with self.assertRaises(RuntimeError):
            evalset.stream_token_index(96, 60)                         # tokens missing

    def test_stream_tokens_replace_the_clips(self):
        data = fake_set(np.random.default_rng(3))
        streams = evalset.scenes(data, 3, 50, seed=5)
        per = {c: [np.full((sum(L for _, L, *_ in plan), 6), 100 * i + k, np.float32)
                   for k, (_, plan) in enumerate(streams)]
               for i, c in enumerate(evalset.CONDITIONS)}
        cont = dict(data, stream_audio=per)
        for c in ("clean", "snr0"):
            for k, ((tok, lab), (tok0, lab0)) in enumerate(zip(
                    evalset.tokens(cont, streams, c, "unrelated"),
                    evalset.tokens(data, streams, c, "unrelated"))):
                np.testing.assert_array_equal(lab, lab0)
                np.testing.assert_array_equal(tok["video"], tok0["video"])
                self.assertEqual(len(tok["audio"]), 50)
                self.assertTrue(np.all(tok["audio"] == 100 * evalset.CONDITIONS.index(c) + k))

    def test_models_of_both_modes_are_refused(self):
        import argparse
        from conytrain.av import cli
        args = lambda mode: argparse.Namespace(
            audio_cnn=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"),
            video_cnn=os.path.join(REPO, "models", "imagenet", "mobilenet_v2.safetensors"),
            audio_mode=mode, train_seed=1, d=16, heads=2, ff=32, window=4, landmarks=2,
            dropout=0.0)
        cont = avtrain.make_model(("audio", "video"), args("continual"))
        win = avtrain.make_model(("audio",), args("window"))
        self.assertEqual(cli.grid_audio_mode({"fused": cont, "audio": cont}), "continual")
        self.assertEqual(cli.grid_audio_mode({"fused": win, "audio": win}), "window")
        with self.assertRaisesRegex(SystemExit, "fused continual, audio window"):
            cli.grid_audio_mode({"fused": cont, "audio": win})


class GoalsTest(unittest.TestCase):
    def test_margins(self):
        cell = lambda v: {"all": v, **{c: v for c in sources.CLASSES}}
        cells = {"fused": {c: {p: cell(0.8) for p in evalset.PICTURES}
                           for c in evalset.CONDITIONS},
                 "audio": {c: cell(0.7) for c in evalset.CONDITIONS}}
        cells["fused"]["clean"]["unrelated"]["music"] = 0.6     # one class under the audio
        g = evalset.goals(cells)
        self.assertAlmostEqual(g["U"], -10)
        for k in "MDA":
            self.assertAlmostEqual(g[k], 10)
        self.assertIn("| snr0 | 80.0 | 80.0 | 80.0 | 70.0 |", evalset.markdown(cells))


class SamplerTest(unittest.TestCase):
    def test_degraded_only_when_asked(self):
        rng = np.random.default_rng(3)
        data = fake_set(rng)
        train = dict(audio=data["audio"][0], audio_cls=data["audio_cls"],
                     video=data["video"], video_cls=data["video_cls"])
        train["audio_degraded"] = data["audio"][1:3]          # marks 1 and 2
        for p, marks in ((0.0, {0.0}), (1.0, {1.0, 2.0})):
            s = avtrain.SceneSampler(train, ("audio", "video"), 16, 16, p_absent=0,
                                     p_contra=0, p_noisy=0, seed=4, p_degraded=p)
            tok, _, _ = s.stream(200)
            self.assertEqual(set(np.unique(tok["audio"][:, 1]).tolist()), marks)
        del train["audio_degraded"]
        with self.assertRaises(ValueError):
            avtrain.SceneSampler(train, ("audio",), 16, 16, p_degraded=0.5)


if __name__ == "__main__":
    unittest.main()
