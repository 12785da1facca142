#!/usr/bin/python3
"""Runs conytrain.video.train_default (training/conytrain/video/train_default.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.video import train_default

if __name__ == "__main__":
    sys.exit(train_default.main())
