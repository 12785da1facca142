"""convert_vgg_torchvision.py: a small torchvision-layout VGG (BatchNorm, adaptive 7x7
average pool, ReLU + Dropout classifier) saved with torch.save, converted, and run again
in torch the way libcony reads the file (NHWC flatten, pools at the free indices, ReLU
between linears 2+ indices apart); outputs must agree for several input sizes, including
maps smaller and larger than 7x7 (the folded adaptive pool)."""

import os
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from conytrain import safetensors_io
from conytrain.cnn import convert_vgg_torchvision as cvt
from conytrain.golden.imagecnn import TvVgg, randomise_bn


def libcony_forward(tensors, meta, x_nhwc):
    """What include/cony/cnn.h computes from the converted file, written with torch ops."""
    mean = torch.tensor([float(v) for v in meta["input_mean"].split(",")], dtype=torch.float64)
    std = torch.tensor([float(v) for v in meta["input_std"].split(",")], dtype=torch.float64)
    x = ((x_nhwc - mean) / std).permute(0, 3, 1, 2)
    convs = sorted(int(k.split(".")[1]) for k in tensors if k.startswith("features.")
                   and k.endswith(".weight"))
    nxt = 0
    for ci in convs:
        for _ in range(nxt, ci):
            x = F.max_pool2d(x, 2)
        x = F.relu(F.conv2d(x, torch.from_numpy(tensors[f"features.{ci}.weight"]).double(),
                            torch.from_numpy(tensors[f"features.{ci}.bias"]).double(),
                            padding=1))
        nxt = ci + 2
    for _ in range(int(meta["trailing_pools"])):
        x = F.max_pool2d(x, 2)
    x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
    lins = sorted(int(k.split(".")[1]) for k in tensors if k.startswith("embeddings.")
                  and k.endswith(".weight"))
    for j, li in enumerate(lins):
        x = F.linear(x, torch.from_numpy(tensors[f"embeddings.{li}.weight"]).double(),
                     torch.from_numpy(tensors[f"embeddings.{li}.bias"]).double())
        last = j + 1 == len(lins)
        if (not last and lins[j + 1] >= li + 2) or (last and meta["final_relu"] == "true"):
            x = F.relu(x)
    return x


class ConvertVggTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(3)
        torch.set_num_threads(1)
        self.tmp = tempfile.TemporaryDirectory()
        self.model = TvVgg((6, "M", 10, 10, "M"), hidden=20, classes=7)
        randomise_bn(self.model, torch.Generator().manual_seed(4))
        self.model = self.model.double().eval()
        self.pth = os.path.join(self.tmp.name, "vgg.pth")
        torch.save(self.model.state_dict(), self.pth)

    def tearDown(self):
        self.tmp.cleanup()

    def run_case(self, h, w, keep=None):
        out = os.path.join(self.tmp.name, "vgg.safetensors")
        args = [self.pth, "-o", out, "--input-size", str(h), str(w)]
        if keep:
            args += ["--keep-linear", str(keep)]
        cvt.main(args)
        tensors, meta = safetensors_io.load(out)
        self.assertEqual(meta["input_height"], str(h))
        self.assertEqual(meta["input_channels"], "3")
        x = torch.rand(2, h, w, 3, dtype=torch.float64)
        got = libcony_forward(tensors, meta, x)
        mean = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float64).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float64).view(1, 3, 1, 1)
        with torch.no_grad():
            want = self.model((x.permute(0, 3, 1, 2) - mean) / std,
                              None if keep is None else 3 * keep - 1)
        err = (got - want).abs().max().item() / want.abs().max().item()
        self.assertLess(err, 1e-5, f"{h}x{w} keep={keep}: rel err {err}")
        return tensors, meta

    def test_sizes(self):
        for h, w in ((28, 28), (32, 32), (16, 40), (60, 44)):   # maps 7x7, 8x8, 4x10, 15x11
            tensors, meta = self.run_case(h, w)
            self.assertEqual(meta["final_relu"], "false")
            self.assertEqual(meta["trailing_pools"], "1")
            # BatchNorm folded away; convs at 0, 3, 5 (pool at 2), FCs at 0, 3, 6
            self.assertEqual(sorted(k for k in tensors if k.endswith(".weight")),
                             ["embeddings.0.weight", "embeddings.3.weight",
                              "embeddings.6.weight", "features.0.weight",
                              "features.3.weight", "features.5.weight"])

    def test_keep_linear(self):
        tensors, meta = self.run_case(32, 32, keep=2)
        self.assertEqual(meta["final_relu"], "true")
        self.assertNotIn("embeddings.6.weight", tensors)

    def test_errors(self):
        sd = cvt.load_state_dict(self.pth)
        with self.assertRaisesRegex(ValueError, "keep-linear"):
            cvt.convert(sd, 32, 32, keep_linear=4)
        bad = dict(sd)
        bad["features.9.weight"] = np.zeros((4,))
        with self.assertRaisesRegex(ValueError, "features.9.weight"):
            cvt.convert(bad, 32, 32)
        with self.assertRaisesRegex(ValueError, "too small"):
            cvt.convert(sd, 2, 2)


if __name__ == "__main__":
    unittest.main()
