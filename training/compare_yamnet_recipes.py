#!/usr/bin/python3
"""Runs conytrain.audio.compare (training/conytrain/audio/compare.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import compare

if __name__ == "__main__":
    sys.exit(compare.main())
