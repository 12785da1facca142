"""A VGGish-layout network in PyTorch with configurable widths.

The module's state_dict uses the same names, shapes and nn.Sequential indices as
torchvggish's VGGish (`features.K.*` for the convolutions, `embeddings.K.*` for the
fully connected layers), which is what libcony's CNN engine (src/cnn.c) loads:

  features:   for each entry of `conv`: an int c -> Conv2d(prev, c, 3, padding=1)
              followed by ReLU; "M" -> MaxPool2d(2, 2)
  flatten:    NCHW -> NHWC, then view(N, -1) (TensorFlow's order)
  embeddings: Linear + ReLU for each width of `fc` but the last; the last Linear is
              followed by ReLU only if final_relu (torchvggish: yes; current TF: no)

With the defaults this is the full VGGish (72,141,184 parameters).
Written from the layer table in ../shared/research/vggish.md.
"""

import torch
from torch import nn

VGGISH_CONV = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M")
VGGISH_FC = (4096, 4096, 128)


class VGGishLike(nn.Module):
    def __init__(self, conv=VGGISH_CONV, fc=VGGISH_FC, input_hw=(96, 64), in_channels=1,
                 final_relu=True):
        super().__init__()
        layers = []
        c = in_channels
        h, w = input_hw
        for item in conv:
            if item == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                h, w = h // 2, w // 2
            else:
                layers.append(nn.Conv2d(c, int(item), kernel_size=3, padding=1))
                layers.append(nn.ReLU(inplace=True))
                c = int(item)
        self.features = nn.Sequential(*layers)
        mlp = []
        n_in = h * w * c
        for i, width in enumerate(fc):
            mlp.append(nn.Linear(n_in, int(width)))
            if i + 1 < len(fc) or final_relu:
                mlp.append(nn.ReLU(inplace=True))
            n_in = int(width)
        self.embeddings = nn.Sequential(*mlp)
        self.input_hw = tuple(input_hw)
        self.in_channels = in_channels
        self.final_relu = final_relu

    def forward(self, x):
        """x: (N, C, H, W) or (N, H, W) for one channel; returns (N, fc[-1])."""
        if x.dim() == 3:
            x = x.unsqueeze(1)
        x = self.features(x)
        x = x.permute(0, 2, 3, 1).contiguous()    # NCHW -> NHWC before flattening
        return self.embeddings(x.reshape(x.shape[0], -1))


def postprocess_tf(emb, eigen, means):
    """vggish_postprocess.py: float64 PCA, clip to [-2, 2], scale to 0..255,
    truncate (astype(uint8)). emb: (N, D) array; returns float32 (N, D)."""
    import numpy as np
    emb = np.asarray(emb, dtype=np.float64)
    p = (np.asarray(eigen, dtype=np.float64) @ (emb.T - np.asarray(means, np.float64).reshape(-1, 1))).T
    q = (np.clip(p, -2.0, 2.0) + 2.0) * (255.0 / 4.0)
    return np.ascontiguousarray(q.astype(np.uint8).astype(np.float32))


def postprocess_torch(emb, eigen, means):
    """torchvggish Postprocessor: float32 maths, torch.round (half to even)."""
    import numpy as np
    e = torch.as_tensor(emb, dtype=torch.float32)
    E = torch.as_tensor(eigen, dtype=torch.float32)
    mu = torch.as_tensor(means, dtype=torch.float32).reshape(-1, 1)
    p = torch.mm(E, e.t() - mu).t()
    q = torch.round((torch.clamp(p, -2.0, 2.0) + 2.0) * (255.0 / 4.0))
    return np.ascontiguousarray(q.numpy())
