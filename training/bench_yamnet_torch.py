#!/usr/bin/python3
"""Runs conytrain.bench.yamnet_torch (training/conytrain/bench/yamnet_torch.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import yamnet_torch

if __name__ == "__main__":
    sys.exit(yamnet_torch.main())
