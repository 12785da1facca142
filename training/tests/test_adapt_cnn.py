"""audio/adapt.py (train_yamnet_audio.py --adapt-cnn, rules 25 and 28): the cut file gives
the map entering the first adapted layer (24's or 22's), the trainable tail computes
YAMNet's embedding from it as the float64 reference does, the written file changes the
adapted layers only (int8 per channel, within half a step) and ends at the pool (no
AudioSet head), its activation quantisation is YAMNet's before the adapted layers and
calibrated after (rule 32; the recipe and the in-place `quantize` stage write the same
bytes), and libcony runs the written file to the same tokens in float and within a few
int8 steps on the integer path (when the build is there). With --cnn-mode continual (rule
37) the patches are the layer-24 rows a continual token reads: the tail on them is the
float64 continual reference's embedding, and libcony's continual tokens of the written file
are the tail on the rows its cut file gives."""

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
from conytrain.ref import continual_cnn, mobilenet

YAMNET = os.path.join(REPO, "models", "yamnet", "yamnet.safetensors")
with open(adapt.YAMNET_QUANTIZATION) as _f:
    YAMNET_Q = json.load(_f)
LABELS = ["speech", "music", "noise"]


def map_before(net, patch, first):
    """The float64 reference's output of layers 0 to first - 1 (HWC, flat), one patch."""
    cut = dict(net, layers=net["layers"][:first])
    return mobilenet.forward(cut, patch)[1]


def cony_tool():
    build = os.environ.get("CONY_BUILD_ROOT", os.path.join(REPO, "build"))
    path = os.path.join(build, "tools", "cony")
    return path if os.access(path, os.X_OK) else None


def write_wav(path, seconds=1.5, rate=16000, hz=660):
    t = np.arange(int(seconds * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * hz * t) + 0.05 * np.random.default_rng(3).standard_normal(len(t))
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

    def test_continual_tail_is_the_continual_reference(self):
        # the tokens at stride 32 and 64 from a stream's layer-24 rows: each token reads
        # rows j h - 1 ... j h + 3, row -1 the start's zeros (the reference pads nothing
        # after the stream: its last rows' lookahead is cut off)
        frames = np.random.default_rng(8).normal(-3, 2, (96 + 10 * 32 + 40, 64))
        rows = continual_cnn.final_rows(self.net, frames, every=True)[24]
        rows = rows.reshape(len(rows), -1).astype(np.float32)
        tail = adapt.Tail(self.tensors, self.meta["layers"].split(), 25, continual=True)
        for hop, n in ((32, 7), (64, 4)):
            want, _ = continual_cnn.stream(self.net, frames, hop)
            self.assertEqual(len(want), n)
            patches = adapt.continual_patches(rows, n, hop // 32)
            self.assertEqual(patches.shape, (n, 5 * 2 * 1024))
            np.testing.assert_array_equal(patches[0, :2048], 0)
            with torch.no_grad():
                got = tail(torch.from_numpy(patches)).numpy()
            np.testing.assert_allclose(got, want, atol=2e-4)
        with self.assertRaisesRegex(RuntimeError, "lacks the last row"):
            adapt.continual_patches(rows[:8], 7)
        # the rows back from the cut file's overlapping tokens, K = 3 rows each
        tokens = np.stack([rows[j:j + 3].reshape(-1) for j in range(len(rows) - 2)])
        np.testing.assert_array_equal(adapt.rows_of_tokens(tokens), rows)
        tokens[2, 0] += 1
        with self.assertRaisesRegex(RuntimeError, "do not share"):
            adapt.rows_of_tokens(tokens)
        with self.assertRaisesRegex(RuntimeError, "only layers 25 and 26"):
            adapt.Tail(self.tensors, self.meta["layers"].split(), 23, continual=True)

    def test_clip_tokens_counts_as_cony_embed(self):
        wav = os.path.join(self.tmp.name, "x.wav")
        for seconds, stride, n in ((5.0, 32, 13), (5.0, 25, 17), (0.5, 32, 0)):
            write_wav(wav, seconds)
            self.assertEqual(adapt.clip_tokens(wav, stride), n)

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
        for argv, msg in ((["--adapt-cnn", "1", "--stride", "32"], "stride 25 only"),
                          (["--adapt-cnn", "1", "--cnn-mode", "continual", "--stride", "32",
                            "--adapt-from", "23"], "layers 25 and 26 only")):
            err = io.StringIO()
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
                yamnet.parse_args(argv)
            self.assertIn(msg, err.getvalue())
        args = yamnet.parse_args(["--adapt-cnn", "1", "--cnn-mode", "continual", "--stride", "32"])
        self.assertEqual((args.cnn_mode, args.stride), ("continual", 32))

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

    def test_tflite_int8_parameters(self):
        self.assertEqual(adapt.tflite_int8(0.0, 6.0), [float(np.float32(6 / 255)), -128])
        self.assertEqual(adapt.tflite_int8(0.5, 3.0), [float(np.float32(3 / 255)), -128])
        scale, zp = adapt.tflite_int8(-1.0, 3.0)      # the range holds 0: -1 maps to -128
        self.assertEqual((scale, zp), (float(np.float32(4 / 255)), -64))
        with self.assertRaisesRegex(RuntimeError, "0 on every patch"):
            adapt.tflite_int8(0.0, 0.0)

    def test_repin_moves_the_pin_only(self):
        path = os.path.join(self.tmp.name, "t.safetensors")
        old, new = "a" * 64, "b" * 64
        tensors = {"x": np.arange(6, dtype=np.float32)}
        safetensors_io.save(path, tensors, {"config": json.dumps({"cnn_sha256": old})})
        want = os.path.join(self.tmp.name, "want.safetensors")
        safetensors_io.save(want, tensors, {"config": json.dumps({"cnn_sha256": new})})
        adapt.repin(path, old, new)
        with open(path, "rb") as f, open(want, "rb") as g:
            self.assertEqual(f.read(), g.read())
        with self.assertRaisesRegex(RuntimeError, "does not pin the CNN"):
            adapt.repin(path, old, new)

    def adapt_args(self, steps=40, quantization=adapt.YAMNET_QUANTIZATION, first=25):
        return argparse.Namespace(train_seed=3, adapt_lr=1e-3, adapt_steps=steps,
                                  adapt_batch=32, adapt_dropout=0.0, label_smoothing=0.0,
                                  cnn=YAMNET, adapt_from=first,
                                  adapt_quantization=quantization)

    def trained_file(self, steps=40, first=25, quantization=adapt.YAMNET_QUANTIZATION):
        """A file adapted on patches whose class shows in the map entering layer first."""
        rng = np.random.default_rng(5)
        y = np.repeat(np.arange(len(LABELS)), 4)
        words = self.meta["layers"].split()
        c = self.tensors[f"layers.{first}.weight"].shape[0]
        base = map_before(self.net, self.patch, first)     # a map of YAMNet's own range
        acts = (base * rng.uniform(0.5, 1.5, (len(y), 3, base.size))).astype(np.float32)
        for i, k in enumerate(y):
            acts[i, :, k::c] += 1.0
        args = self.adapt_args(steps, quantization, first)
        tail = adapt.train_tail(args, acts, y, len(LABELS), self.tensors, words, first)
        self.train_acts = acts
        out = os.path.join(self.tmp.name, adapt.CNN_NAME)
        adapt.write_cnn(args, tail, self.tensors, self.meta, LABELS, out, acts)
        return tail, out

    def test_written_file_changes_the_adapted_layers_only(self):
        for first in (25, 23):
            with self.subTest(first=first):
                self.check_written_file(first)

    def check_written_file(self, first):
        tail, out = self.trained_file(first=first)
        tensors, meta = safetensors_io.load(out)
        changed = sorted({k.rsplit(".", 1)[0] for k in tensors
                          if k not in self.tensors or not np.array_equal(tensors[k],
                                                                         self.tensors[k])})
        self.assertEqual(changed, [f"layers.{i}" for i in range(first, 27)])
        # every tensor up to the pool, none of the AudioSet head (layer 28) or its labels;
        # the adapted layers' int32 biases added
        self.assertEqual(sorted(tensors), sorted(
            [k for k in self.tensors if not k.startswith("layers.28.")] +
            [f"layers.{i}.bias_quantized" for i in range(first, 27)]))
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
        self.check_quantization(tensors, meta, first)

    def check_quantization(self, tensors, meta, first):
        """YAMNet's scales before layer first; after it each output's calibrated range
        (min/max over every train patch, widened to 0) in 255 steps; TFLite's int32 biases."""
        q = json.loads(meta["quantization"])
        self.assertEqual(q["input"], YAMNET_Q["input"])
        self.assertEqual(q["layers"][:first], YAMNET_Q["layers"][:first])
        self.assertEqual(len(q["layers"]), 28)
        tail = adapt.Tail(tensors, meta["layers"].split(), first)
        flat = self.train_acts.reshape(-1, self.train_acts.shape[-1])
        with torch.no_grad():
            taps = []
            pooled = tail(torch.from_numpy(flat), taps)
        np.testing.assert_array_equal(taps[-1].numpy(), pooled.numpy())
        self.assertEqual(len(taps), 28 - first)
        for i, t in zip(range(first, 28), taps):
            scale, zp = q["layers"][i]
            self.assertEqual(zp, -128)            # ReLU6 and its mean: never below 0
            self.assertAlmostEqual(scale * 255, float(t.max()), places=5)
            self.assertLessEqual(float(t.max()), 6.0)
        for i in range(first, 27):
            s = q["layers"][i - 1][0] * tensors[f"layers.{i}.weight_scale"].astype(np.float64)
            bq = tensors[f"layers.{i}.bias_quantized"]
            self.assertEqual(bq.dtype, np.int64)
            np.testing.assert_array_equal(bq, np.round(tensors[f"layers.{i}.bias"] / s))

    def test_float_file_without_quantization(self):
        _, out = self.trained_file(steps=5, quantization="none")
        tensors, meta = safetensors_io.load(out)
        self.assertNotIn("quantization", meta)
        self.assertFalse(any(k.endswith("bias_quantized") for k in tensors))

    def test_quantize_stage_writes_what_the_recipe_writes(self):
        # the in-place stage on the float file, calibrated on the same clips' cached maps,
        # gives the recipe's bytes, and the classifier beside it is pinned to them
        _, recipe = self.trained_file(steps=10)
        with open(recipe, "rb") as f:
            want = f.read()
        models = os.path.join(self.tmp.name, "models")
        os.makedirs(models)
        cnn = os.path.join(models, adapt.CNN_NAME)
        _, float_file = self.trained_file(steps=10, quantization="none")
        os.replace(float_file, cnn)
        tf = os.path.join(models, "transformer.safetensors")
        safetensors_io.save(tf, {"x": np.zeros(2, np.float32)}, {"config": json.dumps(
            {"frontend": {"cnn_sha256": adapt.sha256(cnn)}})})
        cache = os.path.join(self.tmp.name, "cache")
        rows = []
        for k, a in enumerate(self.train_acts):
            rows.append({"split": "train", "set": "s", "path": f"c{k}.wav"})
            os.makedirs(os.path.dirname(adapt.acts_path(cache, rows[-1])), exist_ok=True)
            np.save(adapt.acts_path(cache, rows[-1]), a)
        rows.append({"split": "test", "set": "s", "path": "never-read.wav"})
        args = self.adapt_args(10)
        args.cache = cache
        adapt.requantize(args, rows, models)
        with open(cnn, "rb") as f:
            self.assertEqual(f.read(), want)
        _, meta = safetensors_io.load(tf)
        self.assertEqual(json.loads(meta["config"])["frontend"]["cnn_sha256"],
                         adapt.sha256(cnn))

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
        for model, extra, dst in ((cut, [], maps), (out, ["-e", "--precision", "float"], emb)):
            subprocess.run([cony_tool(), "embed", *extra, "--model", model, "--stride", "25",
                            wav, "-o", dst], check=True, capture_output=True)
        a = np.load(maps)
        self.assertEqual(a.shape[1], 6144 if first == 25 else 12288)
        tensors, meta = safetensors_io.load(out)
        with torch.no_grad():
            want = adapt.Tail(tensors, meta["layers"].split(), first)(torch.from_numpy(a)).numpy()
        np.testing.assert_allclose(np.load(emb), want, atol=1e-4)
        # without the head the output is the token itself, -e or not; by default on the
        # integer path (rule 32), within the int8 network's error of the float tokens (its
        # YAMNet prefix alone: up to 4 % relative L2 a token on music.wav, RESULTS.md)
        plain, q8 = (os.path.join(self.tmp.name, n) for n in ("plain.npy", "q8.npy"))
        for extra, dst in (([], plain), (["-e"], q8)):
            subprocess.run([cony_tool(), "embed", *extra, "--model", out, "--stride", "25",
                            wav, "-o", dst], check=True, capture_output=True)
        np.testing.assert_array_equal(np.load(plain), np.load(q8))
        rel = np.linalg.norm(np.load(q8) - want, axis=1) / np.linalg.norm(want, axis=1)
        self.assertLess(float(rel.max()), 0.1)     # 5 to 6 % on this clip
        self.assertGreater(float(np.abs(np.load(q8) - want).max()), 1e-6)
        # and not the original's tokens
        orig = os.path.join(self.tmp.name, "orig.npy")
        subprocess.run([cony_tool(), "embed", "-e", "--model", YAMNET, "--stride", "25", wav,
                        "-o", orig], check=True, capture_output=True)
        self.assertGreater(float(np.abs(np.load(orig) - want).max()), 1e-2)
        info = subprocess.run([cony_tool(), "info", out], check=True, capture_output=True,
                              text=True).stdout
        self.assertRegex(info, r'adapted: +\{.*"layers": \[%s\]'
                         % ", ".join(str(i) for i in range(first, 27)))
        self.assertRegex(info, r"precision: +int8, all 28 layers")

    @unittest.skipIf(cony_tool() is None, "no built cony (CONY_BUILD_ROOT)")
    def test_continual_adaptation_through_libcony(self):
        # the recipe's continual path (rule 37): the cut file's rows through cony embed
        # --mode continual, the tail trained on their patches, and the written file's
        # continual tokens in libcony (float: the tail's to 1e-4, write_tokens' own check;
        # integer path: within the int8 network's error)
        rows = []
        for k, hz in enumerate((440, 1320)):
            write_wav(os.path.join(self.tmp.name, f"c{k}.wav"), 5.0, hz=hz)
            rows.append({"root": self.tmp.name, "path": f"c{k}.wav", "set": "s",
                         "split": "train", "label": LABELS[k]})
        args = self.adapt_args(steps=10)
        args.cony, args.cache, args.work, args.jobs = cony_tool(), self.tmp.name, self.tmp.name, 1
        args.cnn_mode, args.stride = "continual", 32
        adapt.stage_acts(args, rows)
        self.assertEqual(np.load(adapt.acts_path(self.tmp.name, rows[0], 25, "continual")).shape,
                         (16, 2048))
        acts = adapt.load_patches(args, rows)
        self.assertEqual(acts.shape, (2, 13, 5 * 2048))
        words = self.meta["layers"].split()
        tail = adapt.train_tail(args, acts, np.arange(2), 2, self.tensors, words)
        self.assertFalse(tail.time_pad)
        out = adapt.write_cnn(args, tail, self.tensors, self.meta, LABELS[:2],
                              os.path.join(self.tmp.name, adapt.CNN_NAME), acts)
        tensors, meta = safetensors_io.load(out)
        self.assertIn("continual", json.loads(meta["adapted"])["maps"])
        cache = os.path.join(self.tmp.name, "tokens")
        adapt.write_tokens(args, rows, out, cache)
        with open(os.path.join(cache, "yamnet.json")) as f:
            self.assertEqual(json.load(f)["cnn_mode"], "continual")
        want = np.load(adapt.token_path(cache, rows[1]))
        q8 = os.path.join(self.tmp.name, "q8.npy")
        subprocess.run([cony_tool(), "embed", "--drop-tail", "-e", "--model", out, "--mode",
                        "continual", "--stride", "32", os.path.join(self.tmp.name, "c1.wav"),
                        "-o", q8], check=True, capture_output=True)
        rel = np.linalg.norm(np.load(q8) - want, axis=1) / np.linalg.norm(want, axis=1)
        self.assertEqual(np.load(q8).shape, (13, 1024))
        self.assertLess(float(rel.max()), 0.1)
        # not the per-window tail's tokens: the maps are the continual ones
        window = adapt.Tail(tensors, words[:-2], 25)
        with torch.no_grad():
            other = window(torch.from_numpy(acts[1][:, 2048:2048 * 4].copy())).numpy()
        self.assertGreater(float(np.abs(other - want).max()), 1e-2)


if __name__ == "__main__":
    unittest.main()
