#!/usr/bin/python3
"""Runs conytrain.bench.mobilenet_ort (training/conytrain/bench/mobilenet_ort.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import mobilenet_ort

if __name__ == "__main__":
    sys.exit(mobilenet_ort.main())
