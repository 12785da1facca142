#!/usr/bin/python3
"""Convert torchvggish weights into the safetensors file libcony's CNN engine loads.

  /usr/bin/python3 training/convert_vggish.py vggish-10086976.pth \
      --pca vggish_pca_params-970ea276.pth -o models/vggish.safetensors

MODEL is a torchvggish state_dict saved with torch.save (`features.K.weight/bias`,
`embeddings.K.weight/bias`; a leading "module." is dropped; `pproc.pca_*` entries of a
full VGGish(postprocess=True) state_dict are taken as the PCA). Names and shapes are
kept 1:1 (torch's conv (out, in, 3, 3) and linear (out, in) layouts are what libcony
reads), only cast to float32.

--pca takes torchvggish's PCA .pth ({pca_eigen_vectors (128, 128), pca_means (128,)},
tensors or numpy arrays) or the official vggish_pca_params.npz; it is written as
pca_eigen_vectors (D, D) and pca_means (D,).

--dtype f16 stores the conv and FC weights as F16 (rounded to nearest: the network then
differs from the F32 one by the rounding, about 1e-4 relative on the embeddings); biases
and the PCA stay F32. libcony keeps F16 FC weights in F16 in memory and computes with
them expanded to float32 (half the memory traffic of a streaming window).

Metadata written: architecture=vggish, input_height/width/channels (96/64/1 unless
given), final_relu. torchvggish applies a ReLU after the last Linear, so the default is
final_relu=true, which makes libcony reproduce torchvggish's embeddings; pass
--no-final-relu for the current TensorFlow behaviour (pre-activation embedding).
"""

import argparse
import os
import re
import sys

import numpy as np

from conytrain import safetensors_io

_NAME = re.compile(r"^(features|embeddings)\.(\d+)\.(weight|bias)$")


def _to_numpy(value, what):
    try:
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().to(torch.float64).numpy()
    except ImportError:
        pass
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{what}: not a numeric tensor ({type(value).__name__})")
    return arr.astype(np.float64)


def _load_any(path):
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    import torch
    obj = torch.load(path, map_location="cpu")
    if hasattr(obj, "state_dict") and not isinstance(obj, dict):
        obj = obj.state_dict()
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a state_dict (a dict of tensors), got {type(obj).__name__}")
    return dict(obj)


def convert(model_path, pca_path=None, final_relu=True, input_hw=(96, 64), in_channels=1):
    """Returns ({name: float32 array}, metadata) ready for safetensors_io.save."""
    state = _load_any(model_path)
    out, pca = {}, {}
    for name, value in state.items():
        key = name[len("module."):] if name.startswith("module.") else name
        if key in ("pproc.pca_eigen_vectors", "pproc.pca_means"):
            pca[key.split(".", 1)[1]] = _to_numpy(value, f"{model_path}: {name}")
            continue
        m = _NAME.match(key)
        if not m:
            raise ValueError(f"{model_path}: unexpected tensor {name} (expected torchvggish names "
                             "features.K.weight/bias and embeddings.K.weight/bias)")
        arr = _to_numpy(value, f"{model_path}: {name}")
        kind, _, part = m.groups()
        if part == "weight":
            want = 4 if kind == "features" else 2
            if arr.ndim != want or (kind == "features" and arr.shape[2:] != (3, 3)):
                raise ValueError(f"{model_path}: tensor {name} has shape {tuple(arr.shape)}, expected "
                                 + ("(out, in, 3, 3)" if kind == "features" else "(out, in)"))
        elif arr.ndim != 1:
            raise ValueError(f"{model_path}: tensor {name} has shape {tuple(arr.shape)}, expected (out,)")
        if not np.isfinite(arr).all():
            raise ValueError(f"{model_path}: tensor {name} contains NaN or Inf")
        out[key] = arr.astype(np.float32)
    if not any(k.startswith("embeddings.") for k in out):
        raise ValueError(f"{model_path}: no embeddings.K.weight tensors: not a torchvggish state_dict")

    if pca_path is not None:
        p = _load_any(pca_path)
        for key in ("pca_eigen_vectors", "pca_means"):
            if key not in p:
                raise ValueError(f"{pca_path}: tensor {key} is missing")
            pca[key] = _to_numpy(p[key], f"{pca_path}: {key}")
    if pca:
        if set(pca) != {"pca_eigen_vectors", "pca_means"}:
            raise ValueError(f"{model_path}: the PCA needs both pca_eigen_vectors and pca_means")
        e = pca["pca_eigen_vectors"]
        mu = pca["pca_means"].reshape(-1)
        if e.ndim != 2 or e.shape[0] != e.shape[1] or mu.shape[0] != e.shape[0]:
            raise ValueError(f"PCA: pca_eigen_vectors {e.shape} / pca_means {pca['pca_means'].shape}: "
                             "expected (D, D) and (D,) or (D, 1)")
        out["pca_eigen_vectors"] = e.astype(np.float32)
        out["pca_means"] = mu.astype(np.float32)

    meta = {
        "architecture": "vggish",
        "input_height": str(input_hw[0]),
        "input_width": str(input_hw[1]),
        "input_channels": str(in_channels),
        "final_relu": "true" if final_relu else "false",
        "source": os.path.basename(model_path),
    }
    return out, meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="torchvggish state_dict (.pth)")
    ap.add_argument("--pca", help="PCA parameters (.pth with pca_eigen_vectors/pca_means, or .npz)")
    ap.add_argument("-o", "--output", required=True, help="output .safetensors")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--final-relu", dest="final_relu", action="store_true", default=True,
                   help="ReLU after the last FC layer, as torchvggish (default)")
    g.add_argument("--no-final-relu", dest="final_relu", action="store_false",
                   help="pre-activation embedding, as current TensorFlow VGGish")
    ap.add_argument("--input-size", default="96x64", help="HxW of the input patch (default 96x64)")
    ap.add_argument("--dtype", choices=("f32", "f16"), default="f32",
                    help="storage of the conv and FC weights (default f32); f16 halves the file, "
                         "and libcony then keeps the FC weights in F16 in memory (biases and PCA "
                         "stay F32)")
    args = ap.parse_args(argv)
    try:
        h, w = (int(v) for v in args.input_size.lower().split("x"))
        tensors, meta = convert(args.model, args.pca, args.final_relu, (h, w))
    except (ValueError, OSError, RuntimeError) as e:
        print(f"convert_vggish: {e}", file=sys.stderr)
        return 1
    dtypes = None
    if args.dtype == "f16":
        dtypes = {k: "F16" for k in tensors if k.endswith(".weight")}
        big = [k for k in dtypes if np.abs(tensors[k]).max() >= 65520.0]
        if big:
            print(f"convert_vggish: {big[0]} has weights outside the F16 range", file=sys.stderr)
            return 1
        meta["weights_dtype"] = "F16"
    safetensors_io.save(args.output, tensors, meta, dtypes=dtypes)
    n = sum(v.size for k, v in tensors.items() if not k.startswith("pca"))
    print(f"{args.output}: {len(tensors)} tensors, {n} parameters, {args.dtype.upper()} weights"
          f"{', with PCA' if 'pca_means' in tensors else ''}, final_relu={meta['final_relu']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
