#!/usr/bin/python3
"""Exports a trained checkpoint (train.py) to the safetensors model file that libcony
loads (docs/model-format.md).

    /usr/bin/python3 training/export.py CHECKPOINT.pt -o MODEL.safetensors [--dtype f16]
        [--output-scores softmax|sigmoid]

--dtype f16 stores every tensor as IEEE half (half the file size); libcony converts to
float32 on load, so the model then computes with the half-rounded weights.

--output-scores records how the elements turn logits into scores (config key "output"):
softmax (one class per step, the default, written only when asked) or sigmoid (multi-label:
each class on its own, for models trained with a per-class binary loss).
"""

import argparse
import json
import struct

import numpy as np
import torch

from conytrain import safetensors_io
from conytrain.ref.attention import VARIANTS
from conytrain.ref.model import load_checkpoint


def save_f16(path, tensors, metadata):
    """safetensors with F16 tensors (safetensors_io writes F32 only)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name], dtype="<f2")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"tensor {name} overflows float16")
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": "F16", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def export_model(model, path, dtype="f32"):
    """Writes `model` (a ConyEncoderClassifier) as a safetensors model file, F32 (or F16)."""
    tensors = model.export_tensors()
    c = model.config
    for b, v in enumerate(c["attention"]):
        if v in ("cony-fixed", "nystrom-fixed") and f"blocks.{b}.attn.q_landmarks" not in tensors:
            raise ValueError(f"block {b} uses {v} but has no fixed landmarks")
    for name, arr in tensors.items():
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"tensor {name} holds non-finite values")
    if dtype == "f16":
        save_f16(path, tensors, {"config": model.config_json()})
    elif dtype == "f32":
        safetensors_io.save(path, tensors, {"config": model.config_json()})
    else:
        raise ValueError(f"dtype must be f32 or f16, not {dtype!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--attention", choices=VARIANTS,
                    help="record this variant as the trained one in every block")
    ap.add_argument("--output-scores", choices=("softmax", "sigmoid"),
                    help="record the score function (config key 'output'; absent = softmax)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(args.checkpoint)
    if args.attention:
        model.config["attention"] = [args.attention] * model.config["blocks"]
    if args.output_scores:
        model.config["output"] = args.output_scores
    export_model(model, args.output, args.dtype)
    print(f"wrote {args.output}: {sum(a.size for a in model.export_tensors().values())} parameters")


if __name__ == "__main__":
    main()
