#!/usr/bin/python3
"""Runs conytrain.golden.continual_cnn (training/conytrain/golden/continual_cnn.py): its
docstring tells what it does and how."""

import sys

from conytrain.golden import continual_cnn

if __name__ == "__main__":
    sys.exit(continual_cnn.main())
