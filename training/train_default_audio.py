#!/usr/bin/python3
"""Runs conytrain.audio.train_default (training/conytrain/audio/train_default.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import train_default

if __name__ == "__main__":
    sys.exit(train_default.main())
