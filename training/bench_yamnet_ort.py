#!/usr/bin/python3
"""Runs conytrain.bench.yamnet_ort (training/conytrain/bench/yamnet_ort.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import yamnet_ort

if __name__ == "__main__":
    sys.exit(yamnet_ort.main())
