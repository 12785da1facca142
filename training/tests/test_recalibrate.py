"""audio/recalibrate.py (training/recalibrate_continual.py, rule 39): after the fit every time
layer's continual pre-activation has the per-window mean and spread per channel; the
written file changes only weight scales and biases (int8 codes kept, TFLite int32 biases
consistent with them); and libcony runs it continually to the float64 reference of the
recalibrated net (float path) and to the integer reference (int8 path)."""

import os
import subprocess
import tempfile
import unittest

import numpy as np

from conytrain import REPO, safetensors_io
from conytrain.audio import adapt, recalibrate
from conytrain.ref import continual_cnn, mobilenet, qmobilenet

Q8 = os.path.join(REPO, "tests", "golden", "continual", "q8.safetensors")
HOP = 8  # the small net's time stride


def streams(seed, n=3, rows=160):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, 16)) * 2 + rng.standard_normal(16) for _ in range(n)]


def continual_moments(net, frames_list):
    """Moments of every time layer's continual pre-activation (the net as it is)."""
    _, w, c = net["input"]
    _, _, geo = continual_cnn.geometry(net)
    xs = [np.asarray(f, np.float64).reshape(-1, w, c) for f in frames_list]
    out = []
    for (word, s, pad), (_, wt, b) in zip(geo, recalibrate.time_layers(net)):
        zs = [continual_cnn.time_layer(word, x, wt, s, pad) + b for x in xs]
        m = recalibrate.Moments()
        for z in zs:
            m.add(z)
        out.append(m)
        xs = [np.clip(z, 0.0, net["relu_max"]) for z in zs]
    return out


def cony_tool():
    build = os.environ.get("CONY_BUILD_ROOT", os.path.join(REPO, "build"))
    path = os.path.join(build, "tools", "cony")
    return path if os.access(path, os.X_OK) else None


class Recalibrate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tensors, cls.meta = safetensors_io.load(Q8)
        cls.net = mobilenet.from_tensors(cls.tensors, cls.meta)
        cls.streams = streams(7)
        cls.fits = recalibrate.fit(cls.net, cls.streams, HOP)

    def test_continual_moments_become_the_window_ones(self):
        window = recalibrate.window_moments(self.net, self.streams, HOP)
        before = continual_moments(self.net, self.streams)
        after = continual_moments(recalibrate.recalibrated_net(self.net, self.fits), self.streams)
        moved = 0
        for i, (w, b, a) in enumerate(zip(window, before, after)):
            mw, sw = w.mean_std()
            ma, sa = a.mean_std()
            live = b.mean_std()[1] > recalibrate.MIN_STD
            with self.subTest(layer=i):
                np.testing.assert_allclose(ma, mw, atol=1e-9)
                np.testing.assert_allclose(sa[live], sw[live], rtol=1e-9, atol=1e-12)
            moved += np.abs(b.mean_std()[0] - mw).max() > 1e-3
        self.assertGreater(moved, 0, "the two modes already agreed: the test shows nothing")

    def test_file_keeps_codes_and_int32_biases_fit(self):
        tensors, meta = recalibrate.apply(self.tensors, self.meta, self.fits, {"test": 1})
        ref = recalibrate.recalibrated_net(self.net, self.fits)
        quant = __import__("json").loads(meta["quantization"])
        for i in range(len(self.fits)):
            base = f"layers.{i}"
            np.testing.assert_array_equal(tensors[base + ".weight"], self.tensors[base + ".weight"])
            np.testing.assert_allclose(mobilenet.dequantised(tensors, base), ref["layers"][i][1],
                                       rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose(tensors[base + ".bias"], ref["layers"][i][2], rtol=1e-6,
                                       atol=1e-6)
            s_in = np.float64(np.float32(quant["layers"][i - 1][0] if i else quant["input"][0]))
            want = np.round(tensors[base + ".bias"].astype(np.float64)
                            / (s_in * tensors[base + ".weight_scale"].astype(np.float64)))
            np.testing.assert_array_equal(tensors[base + ".bias_quantized"], want)
        for key in ("layers.10.weight", "layers.10.bias"):  # the fc after the pool
            np.testing.assert_array_equal(tensors[key], self.tensors[key])
        self.assertIn('"test": 1', meta["recalibrated"])

    def test_libcony_runs_the_recalibrated_file(self):
        cony = cony_tool()
        if cony is None:
            self.skipTest("cony not built")
        tensors, meta = recalibrate.apply(self.tensors, self.meta, self.fits, {"test": 1})
        frames = streams(8, n=1, rows=120)[0].astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.safetensors")
            safetensors_io.save(path, tensors, meta, adapt.dtypes_of(tensors))
            np.save(os.path.join(tmp, "f.npy"), frames)
            got = {}
            for precision in ("float", "int8"):
                out = os.path.join(tmp, precision + ".npy")
                subprocess.run([cony, "embed", "-e", "-m", path, "--mode", "continual", "-s",
                                str(HOP), "--precision", precision, "-o", out,
                                os.path.join(tmp, "f.npy")], check=True, capture_output=True)
                got[precision] = np.load(out)
            want, _ = continual_cnn.stream(mobilenet.load(path), frames, HOP)
            n = len(want)
            self.assertGreater(n, 5)
            np.testing.assert_allclose(got["float"][:n], want, rtol=1e-4, atol=1e-5)
            want8, _ = continual_cnn.stream_int8(qmobilenet.load(path), frames, HOP)
            np.testing.assert_array_equal(got["int8"][:n], want8[:n])
            info = subprocess.run([cony, "info", path], check=True, capture_output=True,
                                  text=True).stdout
            self.assertRegex(info, r'(?m)^recalibrated: \{.*"test": 1')


if __name__ == "__main__":
    unittest.main()
