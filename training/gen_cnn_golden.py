#!/usr/bin/python3
"""Runs conytrain.golden.cnn (training/conytrain/golden/cnn.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import cnn

if __name__ == "__main__":
    sys.exit(cnn.main())
