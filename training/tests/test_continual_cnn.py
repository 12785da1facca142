"""The continual CNN's float64 reference (conytrain/ref/continual_cnn.py): the committed
goldens of tests/golden/continual (float and integer) are what gen_continual_cnn_golden.py
writes (an edit is caught), its rows equal the per-window reference's on every row no window edge reaches,
and hops that are not a multiple of the time stride are refused."""

import os
import tempfile
import unittest

import numpy as np

from conytrain.golden import continual_cnn as gen
from conytrain.golden.check import bumped, edited_copy
from conytrain.golden.mobilenet import random_tensors
from conytrain.ref import continual_cnn, mobilenet

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "golden", "continual")


def net_of_height(tensors, height):
    return mobilenet.from_tensors(tensors, {
        "network": "mobilenet_v1", "input_height": str(height),
        "input_width": str(gen.INPUT[1]), "input_channels": "1",
        "layers": " ".join(word for word, _ in gen.LAYERS)})


def window_map(net, x):
    """The per-window reference's final map (before the gap) of one window x."""
    h, w, c = net["input"]
    v = np.asarray(x, np.float64).reshape(h, w, c)
    act = lambda u: np.clip(u, 0.0, net["relu_max"])  # noqa: E731
    for word, wt, b in net["layers"]:
        if word.startswith("conv3x3"):
            v = act(mobilenet.conv3x3(v, wt, b, int(word[-1])))
        elif word.startswith("dw3x3"):
            v = act(mobilenet.depthwise3x3(v, wt, b, int(word[-1])))
        elif word == "conv1x1":
            v = act(np.einsum("yxi,oi->yxo", v, wt[:, :, 0, 0]) + b)
        else:
            return v
    return v


class ContinualCnnTest(unittest.TestCase):
    def test_golden_up_to_date(self):
        self.assertEqual(gen.verify(GOLDEN), [])

    def test_golden_edits_are_caught(self):
        for rel in ("hop8_scores.npy", "hop16_embedding.npy", "stream.npy",
                    "q8_hop8_scores.npy", "q8_hop16_embedding.npy"):
            with self.subTest(rel=rel), tempfile.TemporaryDirectory() as tmp:
                self.assertTrue(gen.verify(edited_copy(GOLDEN, rel, tmp + "/g", bumped)))

    def test_rows_equal_per_window_inside(self):
        """One long window from the stream's start has the stream's rows on every row
        whose input ends inside it; the last rows (the window's bottom edge) differ."""
        tensors = random_tensors(np.random.default_rng(5), gen.LAYERS, gen.INPUT)
        small, big = net_of_height(tensors, 24), net_of_height(tensors, 96)
        x = np.random.default_rng(6).standard_normal((140, gen.INPUT[1])) * 3
        S, K, _ = continual_cnn.geometry(small)
        la = continual_cnn.lookahead(small)
        rows, full = continual_cnn.final_rows(small, x), window_map(big, x[:96])
        n = len([r for r in range(len(full)) if (r - K + 1) * S + 23 + la <= 95])
        self.assertEqual(len(continual_cnn.final_rows(small, x[:96])), n)
        np.testing.assert_allclose(rows[:n], full[:n], rtol=0, atol=1e-12)
        self.assertGreater(np.abs(rows[n] - full[n]).max(), 1e-3)
        self.assertEqual((S, K, la), (8, 3, 13))

    def test_hop_refused(self):
        net = net_of_height(random_tensors(np.random.default_rng(5), gen.LAYERS, gen.INPUT), 24)
        with self.assertRaisesRegex(ValueError, "multiple of the time stride 8"):
            continual_cnn.stream(net, np.zeros((40, 16)), 12)
        with self.assertRaisesRegex(ValueError, "window 20 is not a multiple"):
            continual_cnn.geometry(net_of_height(random_tensors(
                np.random.default_rng(5), gen.LAYERS, gen.INPUT), 20))


if __name__ == "__main__":
    unittest.main()
