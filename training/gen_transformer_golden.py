#!/usr/bin/python3
"""Runs conytrain.golden.transformer (training/conytrain/golden/transformer.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import transformer

if __name__ == "__main__":
    sys.exit(transformer.main())
