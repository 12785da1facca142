#!/usr/bin/python3
"""Runs conytrain.golden.imagecnn (training/conytrain/golden/imagecnn.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import imagecnn

if __name__ == "__main__":
    sys.exit(imagecnn.main())
