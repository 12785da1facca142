#!/usr/bin/python3
"""Runs conytrain.bench.torch_step (training/conytrain/bench/torch_step.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import torch_step

if __name__ == "__main__":
    sys.exit(torch_step.main())
