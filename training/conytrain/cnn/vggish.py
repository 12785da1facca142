"""A VGGish-layout network in PyTorch with configurable widths.

The module's state_dict uses the same names, shapes and nn.Sequential indices as
torchvggish's VGGish (`features.K.*` for the convolutions, `embeddings.K.*` for the
fully connected layers), which is what libcony's CNN engine (src/cnn/cnn.c) loads:

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
                 final_relu=True, center_height=False, batch_norm=False):
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
                if batch_norm:
                    # for training only: fold_batch_norm() merges it into the convolution
                    layers.append(nn.BatchNorm2d(int(item)))
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
        # center_height: each column (mel band) minus its mean over the height (frames),
        # as libcony does for a file with center_height = "true"
        self.center_height = center_height

    def forward(self, x):
        """x: (N, C, H, W) or (N, H, W) for one channel; returns (N, fc[-1])."""
        if x.dim() == 3:
            x = x.unsqueeze(1)
        if self.center_height:
            x = x - x.mean(2, keepdim=True)
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


def layout(net):
    """(conv, fc) of a VGGishLike, as its constructor takes them."""
    conv = tuple("M" if isinstance(m, nn.MaxPool2d) else m.out_channels
                 for m in net.features if isinstance(m, (nn.Conv2d, nn.MaxPool2d)))
    fc = tuple(m.out_features for m in net.embeddings if isinstance(m, nn.Linear))
    return conv, fc


def fold_batch_norm(net):
    """The VGGishLike without batch normalisation that computes what net (built with
    batch_norm=True) computes in eval mode: each BatchNorm2d's running statistics and affine
    parameters merged into the convolution before it, w' = w * g / sqrt(var + eps),
    b' = (b - mean) * g / sqrt(var + eps) + beta. This is the layout libcony loads, so
    batch normalisation costs nothing at inference."""
    conv, fc = layout(net)
    plain = VGGishLike(conv, fc, net.input_hw, net.in_channels, net.final_relu, net.center_height)
    src = list(net.features)
    dst = [m for m in plain.features if isinstance(m, nn.Conv2d)]
    convs = [(m, src[i + 1] if i + 1 < len(src) and isinstance(src[i + 1], nn.BatchNorm2d) else None)
             for i, m in enumerate(src) if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        for (c, bn), p in zip(convs, dst):
            w, b = c.weight.double(), c.bias.double()
            if bn is not None:
                scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
                w = w * scale.view(-1, 1, 1, 1)
                b = (b - bn.running_mean.double()) * scale + bn.bias.double()
            p.weight.copy_(w.float())
            p.bias.copy_(b.float())
        plain.embeddings.load_state_dict(net.embeddings.state_dict())
    return plain.eval()


def pack_side_by_side(members):
    """One VGGishLike that computes K independently trained VGGishLike networks of the
    same layout at once: its embedding is the concatenation of theirs, in order.

    libcony's engine runs the dense VGGish layout only (no grouped convolutions), so the
    members are packed with block-diagonal weights: every layer is K times as wide, member
    k owns the k-th slice of channels (the first convolution, which reads the one input
    channel, is simply stacked), and the zero blocks keep the members apart. The cost is
    K^2 times one member's multiply-adds in the convolutions after the first and in the
    fully connected layers; this is how an ensemble of small CNNs ships as one file."""
    K = len(members)
    ref = members[0]
    if any(m.center_height != ref.center_height for m in members):
        raise ValueError("pack_side_by_side: members differ in center_height")
    conv, fc = layout(ref)
    packed = VGGishLike(tuple(c if c == "M" else c * K for c in conv), tuple(w * K for w in fc),
                        ref.input_hw, ref.in_channels, ref.final_relu, ref.center_height)
    convs = [[m for m in net.features if isinstance(m, nn.Conv2d)] for net in members]
    lins = [[m for m in net.embeddings if isinstance(m, nn.Linear)] for net in members]
    pconv = [m for m in packed.features if isinstance(m, nn.Conv2d)]
    plin = [m for m in packed.embeddings if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for i, p in enumerate(pconv):
            p.weight.zero_()
            for k in range(K):
                w = convs[k][i].weight
                o, c = w.shape[0], w.shape[1]
                ci = slice(0, c) if i == 0 else slice(k * c, (k + 1) * c)
                p.weight[k * o:(k + 1) * o, ci] = w
                p.bias[k * o:(k + 1) * o] = convs[k][i].bias
        c_last = convs[0][-1].weight.shape[0]         # one member's channels at the flatten
        for i, p in enumerate(plin):
            p.weight.zero_()
            for k in range(K):
                w = lins[k][i].weight
                o = w.shape[0]
                if i == 0:
                    # NHWC flatten: the packed input has K * c_last channels per position
                    pw = p.weight.view(p.weight.shape[0], -1, K * c_last)
                    pw[k * o:(k + 1) * o, :, k * c_last:(k + 1) * c_last] = w.view(o, -1, c_last)
                else:
                    n = w.shape[1]
                    p.weight[k * o:(k + 1) * o, k * n:(k + 1) * n] = w
                p.bias[k * o:(k + 1) * o] = lins[k][i].bias
    return packed
