"""`cony info`, `cony embed` and `cony tag` on CNN files (tests/golden/mobilenet, the
MobileNet golden of training/gen_mobilenet_golden.py, and the VGG-style golden of
tests/golden/cnn): the output is checked against the float64 reference's goldens.
Run by meson with CONY_TOOL (the built `cony`) and CONY_SOURCE_ROOT."""

import json
import os
import subprocess
import tempfile
import unittest
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("CONY_SOURCE_ROOT", os.path.dirname(os.path.dirname(HERE)))
TOOL = os.environ.get("CONY_TOOL", os.path.join(ROOT, "build", "tools", "cony"))
MOBILENET = os.path.join(ROOT, "tests", "golden", "mobilenet")
VGG = os.path.join(ROOT, "tests", "golden", "cnn", "small.safetensors")


def cony(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)


def rel_err(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


class CliCnnTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.x = np.load(os.path.join(MOBILENET, "input.npy"))          # (4, 21, 16)
        self.scores = np.load(os.path.join(MOBILENET, "f32_scores.npy"))
        self.emb = np.load(os.path.join(MOBILENET, "f32_embedding.npy"))

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_info_mobilenet(self):
        r = cony("info", os.path.join(MOBILENET, "f32.safetensors"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for text in ("architecture: CNN, MobileNet-v1", "input 21x16x1",
                     "depthwise3x3 stride 2 16, out 3x2x16 + ReLU6", "conv1x1 16 -> 24",
                     "sigmoid, out 10", "3734 parameters", "FLOPs/patch:  174048",
                     "embedding 24, scores 10", "labels:       10 (class 0, class 1",
                     '"sample-rate": 16000', "source:       gen_mobilenet_golden.py"):
            self.assertIn(text, r.stdout)

    def test_info_mobilenet_v2(self):
        # issue 55: the MobileNet-v2 file was described as MobileNet-v1
        r = cony("info", os.path.join(ROOT, "models", "imagenet", "mobilenet_v2.safetensors"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("architecture: CNN, MobileNet-v2", r.stdout)
        self.assertNotIn("MobileNet-v1", r.stdout)

    def test_info_yamnet(self):
        # the shipped YAMNet files are MobileNet-v1 (network = mobilenet_v1)
        for model in (("yamnet", "yamnet.safetensors"), ("audio", "yamnet-adapted.safetensors")):
            r = cony("info", os.path.join(ROOT, "models", *model))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("architecture: CNN, MobileNet-v1\n", r.stdout)
            self.assertNotIn("MobileNet-v2", r.stdout)

    def test_info_vgg_and_refusal(self):
        r = cony("info", VGG)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("architecture: CNN, VGG-style", r.stdout)
        self.assertIn("features.10 (max-pool)", r.stdout)
        r = cony("info", os.path.join(MOBILENET, "input.npy"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a classifier model", r.stderr)
        self.assertIn("nor a CNN file", r.stderr)

    def test_embed_patches_and_frames(self):
        model = os.path.join(MOBILENET, "f32.safetensors")
        np.save(self.path("patches.npy"), self.x)
        np.save(self.path("frames.npy"), self.x.reshape(-1, 16))
        for inp, extra in (("patches.npy", []), ("frames.npy", ["--stride", "21"])):
            for flag, want in (([], self.scores), (["--embedding"], self.emb)):
                r = cony("embed", "-m", model, self.path(inp), "-o", self.path("out.npy"),
                         *extra, *flag)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = np.load(self.path("out.npy"))
                self.assertEqual(got.shape, want.shape)
                self.assertLessEqual(rel_err(got, want), 1e-4)
        r = cony("embed", "-m", VGG, self.path("patches.npy"), "-o", self.path("v.npy"),
                 "--embedding")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no embedding output", r.stderr)

    def test_embed_pads_the_tail(self):
        # frames no full window covers: one more window, completed with the silence of the
        # model's front end, log(0.01) (its frontend names no log-offset: VGGish's), as a
        # ready patch padded so gives; fewer frames than a window: one window, not none
        model = os.path.join(MOBILENET, "f32.safetensors")
        frames = self.x.reshape(-1, 16)                          # 84 frames of 16 bands
        silence = np.float32(np.log(0.01))
        for n, stride, starts in ((10, 21, [0]), (30, 21, [0, 21]), (84, 21, [0, 21, 42, 63]),
                                  (50, 8, [0, 8, 16, 24, 32])):
            np.save(self.path("frames.npy"), frames[:n])
            padded = np.concatenate([frames[:n], np.full((21 * 3, 16), silence, np.float32)])
            np.save(self.path("patches.npy"), np.stack([padded[s:s + 21] for s in starts]))
            for inp, extra in (("frames.npy", ["--stride", str(stride)]), ("patches.npy", [])):
                r = cony("embed", "-m", model, self.path(inp), "-o", self.path(inp + ".out.npy"),
                         *extra)
                self.assertEqual(r.returncode, 0, r.stderr)
            got, want = np.load(self.path("frames.npy.out.npy")), np.load(self.path("patches.npy.out.npy"))
            self.assertEqual(got.shape, (len(starts), 10), n)
            self.assertLessEqual(float(np.abs(got - want).max()), 1e-6, n)
        r = cony("embed", "-m", model, self.path("frames.npy"), "-o", self.path("d.npy"),
                 "--stride", "8", "--drop-tail")
        self.assertEqual(np.load(self.path("d.npy")).shape, (4, 10))   # 1 + (50 - 21) // 8

    def test_embed_continual(self):
        """--mode continual: the continual CNN (docs/continual-cnn.md) on the golden stream
        equals the float64 reference on every token whose input is all real frames; the
        count is window mode's (16 complete windows, a 17th over the tail), the tokens past
        the end reading silence; the stride defaults to the time stride; other strides,
        patches and unknown modes are refused."""
        golden = os.path.join(ROOT, "tests", "golden", "continual")
        net = os.path.join(golden, "net.safetensors")
        stream = os.path.join(golden, "stream.npy")
        want = np.load(os.path.join(golden, "hop8_scores.npy"))          # 15 tokens
        r = cony("embed", "-m", net, stream, "-o", self.path("c.npy"), "--mode", "continual")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = np.load(self.path("c.npy"))
        self.assertEqual(got.shape, (17, 10))
        self.assertLess(rel_err(got[:15], want), 1e-4)
        r = cony("embed", "-m", net, stream, "-o", self.path("w.npy"), "--stride", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(np.abs(np.load(self.path("w.npy"))[:15] - want).max(), 1e-3)
        for args, text in ((("--stride", "12"), "multiple of the network's time stride, 8"),
                           (("--mode", "sideways"), "window or continual")):
            r = cony("embed", "-m", net, stream, "-o", self.path("x.npy"),
                     *(args if args[0] == "--mode" else ("--mode", "continual") + args))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(text, r.stderr)
        r = cony("embed", "-m", os.path.join(MOBILENET, "f32.safetensors"),
                 os.path.join(MOBILENET, "input.npy"), "-o", self.path("p.npy"),
                 "--mode", "continual")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("window of 21 frames", r.stderr)

    def test_embed_list(self):
        """--list: every line's input embedded as its own call would, the continual state
        starting afresh for each (the second stream's tokens equal a call on it alone); a
        malformed line fails naming it."""
        golden = os.path.join(ROOT, "tests", "golden", "continual")
        net = os.path.join(golden, "net.safetensors")
        stream = np.load(os.path.join(golden, "stream.npy"))
        np.save(self.path("a.npy"), stream)
        np.save(self.path("b.npy"), stream[::-1].copy())
        with open(self.path("list"), "w") as f:
            f.write(f"{self.path('a.npy')}\t{self.path('la.npy')}\n"
                    f"{self.path('b.npy')}\t{self.path('lb.npy')}\n")
        for mode in ("continual", "window"):
            r = cony("embed", "-m", net, "--mode", mode, "--list", self.path("list"))
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in ("a", "b"):
                r = cony("embed", "-m", net, "--mode", mode, self.path(name + ".npy"),
                         "-o", self.path("one.npy"))
                self.assertEqual(r.returncode, 0, r.stderr)
                got, want = np.load(self.path(f"l{name}.npy")), np.load(self.path("one.npy"))
                self.assertEqual(got.tobytes(), want.tobytes(), (mode, name))
        with open(self.path("bad"), "w") as f:
            f.write(f"{self.path('a.npy')}\t{self.path('la.npy')}\nno-tab-here\n")
        r = cony("embed", "-m", net, "--list", self.path("bad"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bad:2: expected INPUT<TAB>OUT.npy", r.stderr)

    def test_tag(self):
        np.save(self.path("frames.npy"), self.x.reshape(-1, 16))
        r = cony("tag", "--model", os.path.join(MOBILENET, "f32.safetensors"),
                 self.path("frames.npy"), "--top-k", "3", "--stride", "21")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().split("\n")
        self.assertEqual(len(lines), 4)
        for w, line in enumerate(lines):
            fields = line.split("\t")
            self.assertEqual(fields[0], str(w))
            self.assertEqual(fields[1], f"{w * 0.21:.2f} s")
            order = np.argsort(-self.scores[w])[:3]
            self.assertEqual(len(fields), 5)
            for field, k in zip(fields[2:], order):
                self.assertEqual(field, f"class {k} {self.scores[w, k]:.3f}")
        # no labels in the file: indices; ready patches: no time column
        np.save(self.path("patches.npy"), self.x)
        r = cony("tag", "-m", os.path.join(MOBILENET, "i8.safetensors"), self.path("patches.npy"),
                 "-k", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        want = np.load(os.path.join(MOBILENET, "i8_scores.npy"))
        self.assertEqual([line.split("\t")[1].split()[0] for line in r.stdout.strip().split("\n")],
                         [f"#{k}" for k in want.argmax(axis=1)])

    def test_tag_refuses_an_embedding_network(self):
        # VGGish-style (last layer a 128-d FC embedding) and a MobileNet ending in its pool
        # (the shipped yamnet-adapted): no sigmoid, no labels, so no scores to tag with
        np.save(self.path("frames.npy"), np.zeros((96, 64), np.float32))
        for model, dim in ((VGG, 128),
                           (os.path.join(ROOT, "models", "audio", "yamnet-adapted.safetensors"), 1024)):
            r = cony("tag", "--model", model, self.path("frames.npy"))
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertEqual(r.stdout, "")
            self.assertIn(f"has no scoring head (its last layer is a {dim}-d embedding", r.stderr)

    def test_tag_wav_uses_the_model_frontend(self):
        # the golden's frontend declares 16 mel bands at 16 kHz: a WAV works with it
        t = np.arange(16000) / 16000.0
        pcm = (np.sin(2 * np.pi * 440 * t) * 12000).astype("<i2")
        with wave.open(self.path("a.wav"), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(16000)
            f.writeframes(pcm.tobytes())
        r = cony("tag", "-m", os.path.join(MOBILENET, "f32.safetensors"), self.path("a.wav"))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().split("\n")
        # 98 frames, window 21, stride 48: windows at 0 and 48, and frames 96-97 in a third
        # at 96 padded with silence (YAMNet); --drop-tail: two
        self.assertEqual(len(lines), 3)
        self.assertTrue(lines[1].startswith("1\t0.48 s\tclass "))
        self.assertTrue(lines[2].startswith("2\t0.96 s\tclass "))
        self.assertEqual(len(lines[1].split("\t")), 7)
        r = cony("tag", "-m", os.path.join(MOBILENET, "f32.safetensors"), self.path("a.wav"),
                 "--drop-tail")
        self.assertEqual(len(r.stdout.strip().split("\n")), 2)
        # a model without a frontend takes VGGish's 64 bands: the 16-band MobileNet refuses
        r = cony("tag", "-m", os.path.join(MOBILENET, "i8.safetensors"), self.path("a.wav"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("16-wide patches but its log-mel has 64 bands", r.stderr)

    def test_bench_frontend_yamnet_row(self):
        # a smoke run: the row is printed (speeds are recorded in bench/RESULTS.md, not asserted)
        r = cony("bench", "frontend", "--no-vggish", "--json", "--mel-seconds", "2",
                 "--vggish-seconds", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("mel + YAMNet (random weights, 3729481 parameters, 138.3 MFLOP per patch)",
                      r.stdout)
        self.assertRegex(r.stdout, r"CNN CPU [0-9.]+ ms/patch .* of the sgemm peak")
        self.assertNotIn("PyTorch", r.stdout)  # cony runs no PyTorch: bench/torch_compare.py does
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([row["measure"] for row in rows], ["yamnet"])
        self.assertGreater(rows[0]["cpu_ms_per_patch"], 0)
        self.assertGreater(rows[0]["patches"], 0)

    def test_bench_model_json(self):
        r = cony("bench", "model", "--json", "--seconds", "0.02", "--blocks", "1", "--variants",
                 "cony-fixed,vcc", "--dtype", "f32,f16")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([(x["weights"], x["variant"]) for x in rows],
                         [("f32", "cony-fixed"), ("f32", "vcc"), ("f16", "cony-fixed"),
                          ("f16", "vcc")])
        for x in rows:
            self.assertGreater(x["cpu_us_per_step"], 0)
            self.assertGreater(x["mflop_per_step"], 0)
        r = cony("bench", "model", "--no-torch")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--no-torch", r.stderr)

    def test_torch_compare(self):
        # bench/torch_compare.py puts cony's JSON rows and PyTorch's side by side in one run
        script = os.path.join(ROOT, "bench", "torch_compare.py")
        r = subprocess.run(["/usr/bin/python3", script, "model", "--cony", TOOL, "--blocks", "1",
                            "--variants", "cony", "--dtype", "f32", "--torch-steps", "3",
                            "--seconds", "0.02"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\| 1 \| f32 \| cony \| [0-9.]+ \| [0-9.]+ \| 0\.513 \| "
                         r"[0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+× \|")
        r = subprocess.run(["/usr/bin/python3", script, "frontend", "--cony", TOOL, "--seconds",
                            "1", "--patches", "3"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"PyTorch, same layers .*\| [0-9.]+: libcony \*\*[0-9.]+×\*\*")
        r = subprocess.run(["/usr/bin/python3", script, "attention", "--cony", TOOL, "--windows",
                            "24", "--rounds", "1", "--torch-steps", "3"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\| 24 \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| \*\*[0-9.]+×\*\* \|")
        r = subprocess.run(["/usr/bin/python3", script, "model", "--cony", "/nonexistent/cony"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cony bench model failed", r.stderr)

if __name__ == "__main__":
    unittest.main()
