#!/usr/bin/python3
"""Runs conytrain.bench.kv_attention (training/conytrain/bench/kv_attention.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import kv_attention

if __name__ == "__main__":
    sys.exit(kv_attention.main())
