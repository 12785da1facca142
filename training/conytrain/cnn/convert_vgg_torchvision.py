#!/usr/bin/python3
"""Converts VGG-style weights in torchvision's layout to the libcony CNN model file.

    /usr/bin/python3 training/convert_vgg_torchvision.py vgg11.pth -o vgg11.safetensors \\
        [--input-size 224 224] [--keep-linear 3] [--mean 0.485,0.456,0.406] \\
        [--std 0.229,0.224,0.225] [--trailing-pools 1]

Input: a state_dict saved with torch.save (.pt/.pth; a {"state_dict": ...} wrapper is
accepted) or a safetensors file, with torchvision's VGG names:

    features.K.weight/bias               Conv2d 3x3, padding 1 (out, in, 3, 3)
    features.K+1.weight/bias/running_mean/running_var   BatchNorm2d (vgg*_bn), optional
    classifier.K.weight/bias             Linear layers (ReLU + Dropout between them)

The nn.Sequential indices tell the layers apart as in torchvision: after a conv comes
its ReLU (or BatchNorm + ReLU); any index left over before the next conv is a
MaxPool2d(2, 2). The pools after the last conv leave no index (torchvision's VGGs have
one: --trailing-pools 1). torchvision then applies AdaptiveAvgPool2d((7, 7)) and flattens
in NCHW order; both are linear, so for the chosen --input-size they are folded into
classifier.0's weight, re-ordered to libcony's NHWC flatten. The result computes the same
function as the torchvision model on that input size (to float rounding).

Output (include/cony/cnn.h): features.K (BatchNorm folded into the conv), pools at
the indices between convs, embeddings.K = the kept classifier linears (--keep-linear N:
the first N; a ReLU follows a kept layer that is not the model's last, and then the
file says final_relu=true), __metadata__ input_height/width/channels, input_mean/std
(ImageNet's by default: pixels in 0..1, as torchvision's transforms give them),
trailing_pools.
"""

import argparse
import math

import numpy as np

from conytrain import safetensors_io

IMAGENET_MEAN = "0.485,0.456,0.406"
IMAGENET_STD = "0.229,0.224,0.225"


def load_state_dict(path):
    if path.endswith(".safetensors"):
        tensors, _ = safetensors_io.load(path)
        return {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
    import torch
    sd = torch.load(path, map_location="cpu")
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if hasattr(sd, "state_dict"):
        sd = sd.state_dict()
    out = {}
    for k, v in sd.items():
        if k.startswith("module."):
            k = k[len("module."):]
        if hasattr(v, "numpy") and v.dtype.is_floating_point:
            out[k] = v.detach().double().numpy()
    return out


def adaptive_pool_matrix(n_in, n_out):
    """(n_out, n_in) averaging matrix of torch's adaptive_avg_pool1d."""
    p = np.zeros((n_out, n_in))
    for i in range(n_out):
        a = (i * n_in) // n_out
        b = -(-((i + 1) * n_in) // n_out)
        p[i, a:b] = 1.0 / (b - a)
    return p


def convert(sd, input_h, input_w, keep_linear=None, trailing_pools=1, pool_out=(7, 7),
            bn_eps=1e-5):
    """Returns ({name: float32 array}, metadata) in the libcony layout."""
    feats = sorted({int(k.split(".")[1]) for k in sd if k.startswith("features.")})
    convs = [i for i in feats if sd.get(f"features.{i}.weight") is not None
             and sd[f"features.{i}.weight"].ndim == 4]
    if not convs:
        raise ValueError("no convolution features.K.weight (out, in, 3, 3) found")
    known = set()
    ops = []    # ("conv", w, b) / ("pool",)
    nxt = 0
    for ci in convs:
        for _ in range(nxt, ci):
            ops.append(("pool",))
        w = sd[f"features.{ci}.weight"]
        if w.shape[2:] != (3, 3):
            raise ValueError(f"features.{ci}.weight has shape {w.shape}, expected (out, in, 3, 3)")
        b = sd.get(f"features.{ci}.bias", np.zeros(w.shape[0]))
        known.update({f"features.{ci}.weight", f"features.{ci}.bias"})
        bn = f"features.{ci + 1}"
        if f"{bn}.running_mean" in sd:
            g = sd.get(f"{bn}.weight", np.ones(w.shape[0]))
            beta = sd.get(f"{bn}.bias", np.zeros(w.shape[0]))
            s = g / np.sqrt(sd[f"{bn}.running_var"] + bn_eps)
            w = w * s[:, None, None, None]
            b = (b - sd[f"{bn}.running_mean"]) * s + beta
            known.update({f"{bn}.{n}" for n in ("weight", "bias", "running_mean",
                                                 "running_var", "num_batches_tracked")})
            nxt = ci + 3
        else:
            nxt = ci + 2
        ops.append(("conv", w, b))
    for _ in range(trailing_pools):
        ops.append(("pool",))
    for k in sd:
        if k.startswith("features.") and k not in known:
            raise ValueError(f"unexpected tensor {k} (not a conv or a BatchNorm after one)")

    tensors = {}
    idx = 0
    h, w_, c = input_h, input_w, None
    for op in ops:
        if op[0] == "pool":
            idx += 1
            h, w_ = h // 2, w_ // 2
            if h == 0 or w_ == 0:
                raise ValueError(f"input {input_h}x{input_w} is too small for the pools")
        else:
            tensors[f"features.{idx}.weight"] = op[1]
            tensors[f"features.{idx}.bias"] = op[2]
            c = op[1].shape[0]
            idx += 2
    n_trailing = 0
    for op in reversed(ops):
        if op[0] != "pool":
            break
        n_trailing += 1

    lin = sorted({int(k.split(".")[1]) for k in sd if k.startswith("classifier.")})
    lin = [i for i in lin if sd.get(f"classifier.{i}.weight") is not None]
    if not lin:
        raise ValueError("no classifier.K.weight found")
    for k in sd:
        if k.startswith("classifier.") and int(k.split(".")[1]) not in lin:
            raise ValueError(f"unexpected tensor {k}")
    n_keep = len(lin) if keep_linear is None else keep_linear
    if not 1 <= n_keep <= len(lin):
        raise ValueError(f"--keep-linear {n_keep}: the model has {len(lin)} linear layers")
    # classifier.0: (out, C*ph*pw) over torchvision's pooled NCHW map -> (out, h*w*C) NHWC
    w0 = sd[f"classifier.{lin[0]}.weight"]
    ph, pw = pool_out
    if w0.shape[1] == c * ph * pw:
        ah, aw = adaptive_pool_matrix(h, ph), adaptive_pool_matrix(w_, pw)
        w4 = w0.reshape(w0.shape[0], c, ph, pw)
        full = np.einsum("ocij,iy,jx->oyxc", w4, ah, aw)     # (out, h, w, C)
    elif w0.shape[1] == c * h * w_:
        full = w0.reshape(w0.shape[0], c, h, w_).transpose(0, 2, 3, 1)   # no adaptive pool
    else:
        raise ValueError(f"classifier.{lin[0]}.weight has {w0.shape[1]} inputs, expected "
                         f"{c}x{ph}x{pw} = {c * ph * pw} (after the adaptive pool) or "
                         f"{c}x{h}x{w_} = {c * h * w_}")
    weights = [full.reshape(w0.shape[0], -1)] + [sd[f"classifier.{i}.weight"] for i in lin[1:]]
    # Our indices: a ReLU follows every linear but the model's last one (torchvision puts
    # ReLU + Dropout between them), so kept layers sit 3 apart.
    for j in range(n_keep):
        tensors[f"embeddings.{3 * j}.weight"] = weights[j]
        tensors[f"embeddings.{3 * j}.bias"] = sd[f"classifier.{lin[j]}.bias"]
    meta = {"input_height": str(input_h), "input_width": str(input_w),
            "input_channels": str(convs and sd[f"features.{convs[0]}.weight"].shape[1]),
            "trailing_pools": str(n_trailing),
            "final_relu": "true" if n_keep < len(lin) else "false",
            "converted_from": "torchvision VGG layout (training/convert_vgg_torchvision.py)"}
    return {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()}, meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="state_dict (.pt/.pth) or .safetensors")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--input-size", type=int, nargs=2, default=(224, 224), metavar=("H", "W"))
    ap.add_argument("--keep-linear", type=int, help="keep the first N classifier linears")
    ap.add_argument("--trailing-pools", type=int, default=1)
    ap.add_argument("--mean", default=IMAGENET_MEAN, help="per-channel mean of 0..1 pixels")
    ap.add_argument("--std", default=IMAGENET_STD)
    args = ap.parse_args(argv)
    sd = load_state_dict(args.input)
    tensors, meta = convert(sd, args.input_size[0], args.input_size[1], args.keep_linear,
                            args.trailing_pools)
    if args.mean:
        meta["input_mean"] = args.mean
    if args.std:
        meta["input_std"] = args.std
    safetensors_io.save(args.output, tensors, meta)
    n = sum(v.size for v in tensors.values())
    print(f"wrote {args.output}: {n} parameters, input {args.input_size[0]}x"
          f"{args.input_size[1]}x{meta['input_channels']}")


if __name__ == "__main__":
    main()
