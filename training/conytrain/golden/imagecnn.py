#!/usr/bin/python3
"""Golden files for the image side of the libcony CNN engine (tests/libcony/test_imagecnn.c):
3-channel input, per-channel mean/std normalisation, global average pooling, and a
torchvision-layout VGG (with BatchNorm and the 7x7 adaptive pool) converted by
convert_vgg_torchvision.py, each against torch.

    /usr/bin/python3 training/gen_imagecnn_golden.py [-o tests/golden/imagecnn]

Writes, per case NAME: NAME.safetensors (model), NAME_input.npy (N, H, W, C) float32
pixel values in 0..1, NAME_expected.npy (N, D) float32 torch output (computed in float64).
    gap      own layout: 20x22x3, conv 6, pool, conv 10, conv 12, trailing pool (declared),
             global average pool, FC 16 + ReLU, FC 5; mean/std per channel
    tv       torchvision vgg*_bn layout, cfg [8, M, 16, M] on 32x32 (8x8 map -> adaptive
             7x7, folded), classifier 784 -> 24 -> 24 -> 10, ImageNet mean/std
    tv_keep2 the same file converted with --keep-linear 2 (output: ReLU of the second
             linear, final_relu=true)
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn

from conytrain import REPO, safetensors_io
from conytrain.cnn import convert_vgg_torchvision as cvt

ROOT = REPO


class OwnGap(nn.Module):
    """libcony layout with a global average pool head, in torch (NCHW inside)."""

    def __init__(self, mean, std):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 10, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(10, 12, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.embeddings = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)

    def forward(self, x_nhwc):
        x = (x_nhwc.permute(0, 3, 1, 2) - self.mean) / self.std
        x = self.features(x).mean(dim=(2, 3))
        return self.embeddings(x)


class TvVgg(nn.Module):
    """torchvision's VGG structure (make_layers with batch_norm, AdaptiveAvgPool2d(7),
    classifier with ReLU + Dropout), small."""

    def __init__(self, cfg=(8, "M", 16, "M"), hidden=24, classes=10):
        super().__init__()
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(c * 49, hidden), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(hidden, classes))

    def forward(self, x_nchw, upto=None):
        x = self.avgpool(self.features(x_nchw)).flatten(1)
        layers = list(self.classifier) if upto is None else list(self.classifier)[:upto]
        for m in layers:
            x = m(x)
        return x


def randomise_bn(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data = torch.rand(m.num_features, generator=gen) + 0.5
            m.bias.data = torch.randn(m.num_features, generator=gen) * 0.1
            m.running_mean.data = torch.randn(m.num_features, generator=gen) * 0.1
            m.running_var.data = torch.rand(m.num_features, generator=gen) + 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "tests", "golden", "imagecnn"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    os.makedirs(args.output, exist_ok=True)
    rng = np.random.default_rng(0)

    # --- gap
    mean, std = [0.4, 0.5, 0.3], [0.25, 0.2, 0.3]
    m = OwnGap(mean, std).double().eval()
    x = rng.uniform(0, 1, (3, 20, 22, 3)).astype(np.float32).astype(np.float64)
    with torch.no_grad():
        y = m(torch.from_numpy(x)).numpy()
    tensors = {k: v.numpy() for k, v in m.state_dict().items()}
    safetensors_io.save(os.path.join(args.output, "gap.safetensors"), tensors,
                        {"input_height": "20", "input_width": "22", "input_channels": "3",
                         "input_mean": ",".join(map(str, mean)),
                         "input_std": ",".join(map(str, std)),
                         "global_pool": "avg", "trailing_pools": "1"})
    np.save(os.path.join(args.output, "gap_input.npy"), x.astype(np.float32))
    np.save(os.path.join(args.output, "gap_expected.npy"), y.astype(np.float32))

    # --- tv, tv_keep2
    tv = TvVgg()
    randomise_bn(tv, gen)
    tv = tv.double().eval()
    sd = {k: v.numpy() for k, v in tv.state_dict().items() if v.dtype.is_floating_point}
    x = rng.uniform(0, 1, (2, 32, 32, 3)).astype(np.float32).astype(np.float64)
    mean_t = torch.tensor([float(v) for v in cvt.IMAGENET_MEAN.split(",")], dtype=torch.float64)
    std_t = torch.tensor([float(v) for v in cvt.IMAGENET_STD.split(",")], dtype=torch.float64)
    xn = (torch.from_numpy(x).permute(0, 3, 1, 2) - mean_t.view(1, 3, 1, 1)) / std_t.view(1, 3, 1, 1)
    for name, keep, upto in (("tv", None, None), ("tv_keep2", 2, 5)):
        tensors, meta = cvt.convert(sd, 32, 32, keep, 1)
        meta["input_mean"] = cvt.IMAGENET_MEAN
        meta["input_std"] = cvt.IMAGENET_STD
        safetensors_io.save(os.path.join(args.output, f"{name}.safetensors"), tensors, meta)
        with torch.no_grad():
            y = tv(xn, upto).numpy()
        np.save(os.path.join(args.output, f"{name}_input.npy"), x.astype(np.float32))
        np.save(os.path.join(args.output, f"{name}_expected.npy"), y.astype(np.float32))
    total = sum(os.path.getsize(os.path.join(args.output, f)) for f in os.listdir(args.output))
    print(f"wrote {args.output} ({total} bytes)")


if __name__ == "__main__":
    main()
