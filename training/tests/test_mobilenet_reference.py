"""conytrain/ref/mobilenet.py against torch (float64 conv2d, grouped for the depthwise layers,
TensorFlow SAME padding written out), and the committed tests/golden/mobilenet files are
what gen_mobilenet_golden.py computes (an edit is caught)."""

import os
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.bench import yamnet_torch as bench_yamnet_torch
from conytrain.golden import mobilenet as gen_mobilenet_golden
from conytrain.golden.check import bumped, edited_copy
from conytrain.ref import mobilenet

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GOLDEN = os.path.join(ROOT, "tests", "golden", "mobilenet")


def torch_forward(net, patch):
    h, w, c = net["input"]
    x = torch.from_numpy(np.asarray(patch, dtype=np.float64).reshape(1, h, w, c)).permute(0, 3, 1, 2)
    emb = None
    for word, wt, b in net["layers"]:
        if word[:-1] in ("conv3x3s", "dw3x3s"):
            s = int(word[-1])
            pads = []
            for n in (x.shape[3], x.shape[2]):   # F.pad: last dim first
                out = -(-n // s)
                total = max((out - 1) * s + 3 - n, 0)
                pads += [total // 2, total - total // 2]
            groups = x.shape[1] if word.startswith("dw") else 1
            x = F.conv2d(F.pad(x, pads), torch.from_numpy(wt), torch.from_numpy(b), stride=s,
                         groups=groups).clamp(0, net["relu_max"])
        elif word == "conv1x1":
            x = F.conv2d(x, torch.from_numpy(wt), torch.from_numpy(b)).clamp(0, net["relu_max"])
        elif word == "gap":
            x = x.mean(dim=(2, 3))
            emb = x[0].numpy()
        elif word == "fc":
            x = F.linear(x.reshape(1, -1), torch.from_numpy(wt), torch.from_numpy(b))
        else:
            x = torch.sigmoid(x)
    return emb, x.reshape(-1).numpy()


class MobileNetReferenceTest(unittest.TestCase):
    def test_reference_equals_torch(self):
        x = np.load(os.path.join(GOLDEN, "input.npy"))
        for variant in ("f32", "f16", "i8"):
            net = mobilenet.load(os.path.join(GOLDEN, variant + ".safetensors"))
            for patch in x:
                e_ref, s_ref = mobilenet.forward(net, patch)
                e_t, s_t = torch_forward(net, patch)
                np.testing.assert_allclose(e_ref, e_t, rtol=0, atol=1e-12)
                np.testing.assert_allclose(s_ref, s_t, rtol=0, atol=1e-12)

    def test_bench_network_is_the_reference(self):
        # the PyTorch network `cony bench frontend` times computes the same function
        layers, (h, w, c) = bench_yamnet_torch.file_net(os.path.join(GOLDEN, "f32.safetensors"))
        x = np.load(os.path.join(GOLDEN, "input.npy"))
        want = np.load(os.path.join(GOLDEN, "f32_scores.npy"))
        with torch.no_grad():
            got = bench_yamnet_torch.forward(
                layers, torch.from_numpy(x.reshape(-1, h, w, c)).permute(0, 3, 1, 2)).numpy()
        self.assertLess(np.abs(got - want).max(), 1e-5)
        self.assertEqual(len(bench_yamnet_torch.random_net()), 30)

    def test_bench_network_is_the_reference_v2(self):
        # and the MobileNet-v2 one (linear1x1, add@K, softmax), on normalised images
        layers, (h, w, c) = bench_yamnet_torch.file_net(
            os.path.join(GOLDEN, "v2_f32.safetensors"))
        net = mobilenet.load(os.path.join(GOLDEN, "v2_f32.safetensors"))
        x = (np.load(os.path.join(GOLDEN, "v2_input.npy")) - net["mean"]) / net["std"]
        want = np.load(os.path.join(GOLDEN, "v2_f32_scores.npy"))
        with torch.no_grad():
            got = bench_yamnet_torch.forward(
                layers, torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2)).numpy()
        self.assertLess(np.abs(got - want).max(), 1e-5)

    def test_same_padding(self):
        # stride 2 on an even size: nothing before, one after; odd: one each side
        self.assertEqual(mobilenet.same_padding(16, 2), (8, 0, 1))
        self.assertEqual(mobilenet.same_padding(21, 2), (11, 1, 1))
        self.assertEqual(mobilenet.same_padding(7, 1), (7, 1, 1))

    def test_refusals(self):
        tensors = {"layers.0.weight": np.zeros((2, 1, 3, 3), np.int8),
                   "layers.0.bias": np.zeros(2, np.float32)}
        meta = {"network": "mobilenet_v1", "layers": "conv3x3s1"}
        with self.assertRaises(KeyError):   # I8 without weight_scale
            mobilenet.from_tensors(tensors, meta)
        with self.assertRaises(ValueError):
            mobilenet.from_tensors(tensors, dict(meta, layers="conv5x5"))

    def test_golden_up_to_date(self):
        self.assertEqual(gen_mobilenet_golden.verify(GOLDEN), [])

    def test_golden_edits_are_caught(self):
        for rel in ("i8_scores.npy", "f32_embedding.npy"):
            with self.subTest(rel=rel), tempfile.TemporaryDirectory() as tmp:
                self.assertTrue(gen_mobilenet_golden.verify(
                    edited_copy(GOLDEN, rel, tmp + "/g", bumped)))


if __name__ == "__main__":
    unittest.main()
