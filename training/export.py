#!/usr/bin/python3
"""Exports a trained checkpoint (train.py) to the safetensors model file that libcony
loads (docs/model-format.md).

    /usr/bin/python3 training/export.py CHECKPOINT.pt -o MODEL.safetensors
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import safetensors_io  # noqa: E402
from conyref.attention import VARIANTS  # noqa: E402
from conyref.model import load_checkpoint  # noqa: E402


def export_model(model, path):
    """Writes `model` (a ConyEncoderClassifier) as an F32 safetensors model file."""
    tensors = model.export_tensors()
    c = model.config
    for b, v in enumerate(c["attention"]):
        if v in ("cony-fixed", "nystrom-fixed") and f"blocks.{b}.attn.q_landmarks" not in tensors:
            raise ValueError(f"block {b} uses {v} but has no fixed landmarks")
    for name, arr in tensors.items():
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"tensor {name} holds non-finite values")
    safetensors_io.save(path, tensors, {"config": model.config_json()})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--attention", choices=VARIANTS,
                    help="record this variant as the trained one in every block")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(args.checkpoint)
    if args.attention:
        model.config["attention"] = [args.attention] * model.config["blocks"]
    export_model(model, args.output)
    print(f"wrote {args.output}: {sum(a.size for a in model.export_tensors().values())} parameters")


if __name__ == "__main__":
    main()
