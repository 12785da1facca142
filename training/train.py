#!/usr/bin/python3
"""Runs conytrain.train (training/conytrain/train.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain import train

if __name__ == "__main__":
    sys.exit(train.main())
