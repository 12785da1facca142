"""audio/adapt.py (train_yamnet_audio.py --adapt-cnn, rules 25 and 28): the cut file gives
the map entering the first adapted layer (24's or 22's), the trainable tail computes
YAMNet's embedding from it as the float64 reference does, the written file changes the
adapted layers only (int8 per channel, within half a step) and ends at the pool (no
AudioSet head), and libcony runs the written file to the same tokens (when the build is
there)."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import tempfile
import unittest
import wave

import numpy as np
import torch

from conytrain import REPO, safetensors_io
from conytrain.audio import adapt, yamnet
from conytrain.ref import mobilenet

YAMNET = os.path.join(REPO, "models", "yamnet", "yamnet.safetensors")
LABELS = ["speech", "music", "noise"]


def map_before(net, patch, first):
    """The float64 reference's output of layers 0 to first - 1 (HWC, flat), one patch."""
    cut = dict(net, layers=net["layers"][:first])
    return mobilenet.forward(cut, patch)[1]


def cony_tool():
    build = os.environ.get("CONY_BUILD_ROOT", os.path.join(REPO, "build"))
    path = os.path.join(build, "tools", "cony")
    return path if os.access(path, os.X_OK) else None


def write_wav(path, seconds=1.5, rate=16000):
    t = np.arange(int(seconds * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * 660 * t) + 0.05 * np.random.default_rng(3).standard_normal(len(t))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


class AdaptCnn(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tensors, cls.meta = safetensors_io.load(YAMNET)
        cls.net = mobilenet.from_tensors(cls.tensors, cls.meta)
        cls.patch = np.random.default_rng(7).normal(-3, 2, (96, 64))

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_cut_file_and_tail_are_yamnet(self):
        words = self.meta["layers"].split()
        for first, size in ((25, 3 * 2 * 1024), (23, 6 * 4 * 512)):
            cut = adapt.truncated_cnn(YAMNET, os.path.join(self.tmp.name, "cut.safetensors"),
                                      first)
            a = map_before(self.net, self.patch, first)
            self.assertEqual(a.size, size)
            _, out = mobilenet.forward(mobilenet.load(cut), self.patch)
            np.testing.assert_allclose(out, a, atol=1e-9)
            emb, _ = mobilenet.forward(self.net, self.patch)
            got = adapt.Tail(self.tensors, words, first)(torch.from_numpy(a[None]).float())
            np.testing.assert_allclose(got[0].detach().numpy(), emb, atol=2e-4)

    def test_first_layer_checked(self):
        for first in (24, 26, 11):     # pointwise, pointwise, too early
            with self.assertRaisesRegex(RuntimeError, "--adapt-from"):
                adapt.check_layers(self.meta, first)
        self.assertEqual(adapt.map_shape(self.meta["layers"].split(), 23), (6, 4))

    def test_adapt_options_refused_where_they_cannot_work(self):
        for argv, msg in ((["--adapt-from", "23"], "--adapt-from: only with --adapt-cnn"),
                          (["--adapt-cnn", "1", "--input-head", "1"], "no AudioSet head")):
            err = io.StringIO()
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
                yamnet.parse_args(argv)
            self.assertIn(msg, err.getvalue())
        args = yamnet.parse_args(["--adapt-cnn", "1", "--adapt-from", "23"])
        self.assertEqual((args.adapt_cnn, args.adapt_from), (1, 23))

    def test_load_acts_stacks_the_clips(self):
        maps = np.random.default_rng(2).uniform(0, 6, (3, 17, 12)).astype(np.float32)
        paths = [os.path.join(self.tmp.name, f"{k}.npy") for k in range(3)]
        for p, m in zip(paths, maps):
            np.save(p, m)
        np.testing.assert_array_equal(adapt.load_acts(paths), maps)

    def test_not_yamnet_refused(self):
        meta = dict(self.meta, layers=" ".join(self.meta["layers"].split()[:-4] + ["fc"]))
        with self.assertRaisesRegex(RuntimeError, "not YAMNet-shaped"):
            adapt.check_layers(meta)

    def test_quantised_within_half_a_step(self):
        w = np.random.default_rng(1).normal(0, 0.1, (8, 1, 3, 3))
        q, s = mobilenet.quantised(w)
        self.assertEqual(q.dtype, np.int8)
        self.assertEqual(int(np.abs(q.reshape(8, -1)).max(1).min()), 127)
        err = np.abs(q * s[:, None, None, None] - w)
        self.assertTrue((err <= s[:, None, None, None] / 2 + 1e-12).all())

    def test_training_leaves_the_loaded_tensors_alone(self):
        # the tail trains copies of the file's biases, never the caller's arrays
        biases = {k: v.copy() for k, v in self.tensors.items() if k.endswith(".bias")}
        self.trained_file(steps=20)
        for k, v in biases.items():
            np.testing.assert_array_equal(self.tensors[k], v)

    def trained_file(self, steps=40, first=25):
        """A file adapted on patches whose class shows in the map entering layer first."""
        rng = np.random.default_rng(5)
        y = np.repeat(np.arange(len(LABELS)), 4)
        words = self.meta["layers"].split()
        c = self.tensors[f"layers.{first}.weight"].shape[0]
        base = map_before(self.net, self.patch, first)     # a map of YAMNet's own range
        acts = (base * rng.uniform(0.5, 1.5, (len(y), 3, base.size))).astype(np.float32)
        for i, k in enumerate(y):
            acts[i, :, k::c] += 1.0
        args = argparse.Namespace(train_seed=3, adapt_lr=1e-3, adapt_steps=steps,
                                  adapt_batch=32, adapt_dropout=0.0, label_smoothing=0.0,
                                  cnn=YAMNET)
        tail = adapt.train_tail(args, acts, y, len(LABELS), self.tensors, words, first)
        self.train_acts = acts
        out = os.path.join(self.tmp.name, adapt.CNN_NAME)
        adapt.write_cnn(args, tail, self.tensors, self.meta, LABELS, out)
        return tail, out

    def test_written_file_changes_the_adapted_layers_only(self):
        for first in (25, 23):
            with self.subTest(first=first):
                self.check_written_file(first)

    def check_written_file(self, first):
        tail, out = self.trained_file(first=first)
        tensors, meta = safetensors_io.load(out)
        changed = sorted({k.rsplit(".", 1)[0] for k in tensors
                          if not np.array_equal(tensors[k], self.tensors[k])})
        self.assertEqual(changed, [f"layers.{i}" for i in range(first, 27)])
        # every tensor up to the pool, none of the AudioSet head (layer 28) or its labels
        self.assertEqual(sorted(tensors), sorted(k for k in self.tensors
                                                 if not k.startswith("layers.28.")))
        self.assertEqual(meta["layers"].split(), self.meta["layers"].split()[:-2])
        self.assertNotIn("labels", meta)
        for i in range(first, 27):
            w = tail.weight(i)
            self.assertEqual(tensors[f"layers.{i}.weight"].dtype, np.int8)
            s = tensors[f"layers.{i}.weight_scale"].reshape(-1, 1, 1, 1)
            err = np.abs(mobilenet.dequantised(tensors, f"layers.{i}") - w.detach().numpy())
            self.assertTrue((err <= s / 2 + 1e-6).all())
        info = json.loads(meta["adapted"])
        self.assertEqual((info["layers"], info["classes"]), (list(range(first, 27)), LABELS))

    @unittest.skipIf(cony_tool() is None, "no built cony (CONY_BUILD_ROOT)")
    def test_libcony_runs_the_adapted_file(self):
        for first in (25, 23):
            with self.subTest(first=first):
                self.check_libcony_runs(first)

    def check_libcony_runs(self, first):
        # libcony's tokens from the written file equal the tail over libcony's maps
        _, out = self.trained_file(steps=10, first=first)
        wav = os.path.join(self.tmp.name, "x.wav")
        write_wav(wav)
        cut = adapt.truncated_cnn(YAMNET, os.path.join(self.tmp.name, "cut.safetensors"),
                                  first)
        maps, emb = (os.path.join(self.tmp.name, n) for n in ("maps.npy", "emb.npy"))
        for model, extra, dst in ((cut, [], maps), (out, ["-e"], emb)):
            subprocess.run([cony_tool(), "embed", *extra, "--model", model, "--stride", "25",
                            wav, "-o", dst], check=True, capture_output=True)
        a = np.load(maps)
        self.assertEqual(a.shape[1], 6144 if first == 25 else 12288)
        tensors, meta = safetensors_io.load(out)
        with torch.no_grad():
            want = adapt.Tail(tensors, meta["layers"].split(), first)(torch.from_numpy(a)).numpy()
        np.testing.assert_allclose(np.load(emb), want, atol=1e-4)
        # without the head the output is the token itself, -e or not
        plain = os.path.join(self.tmp.name, "plain.npy")
        subprocess.run([cony_tool(), "embed", "--model", out, "--stride", "25", wav, "-o",
                        plain], check=True, capture_output=True)
        np.testing.assert_array_equal(np.load(plain), np.load(emb))
        # and not the original's tokens
        orig = os.path.join(self.tmp.name, "orig.npy")
        subprocess.run([cony_tool(), "embed", "-e", "--model", YAMNET, "--stride", "25", wav,
                        "-o", orig], check=True, capture_output=True)
        self.assertGreater(float(np.abs(np.load(orig) - want).max()), 1e-2)
        info = subprocess.run([cony_tool(), "info", out], check=True, capture_output=True,
                              text=True).stdout
        self.assertRegex(info, r'adapted: +\{.*"layers": \[%s\]'
                         % ", ".join(str(i) for i in range(first, 27)))


if __name__ == "__main__":
    unittest.main()
