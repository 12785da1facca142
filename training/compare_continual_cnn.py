#!/usr/bin/python3
"""Runs conytrain.audio.continual_compare (training/conytrain/audio/continual_compare.py):
its docstring and --help tell what it does and how."""

import sys

from conytrain.audio import continual_compare

if __name__ == "__main__":
    sys.exit(continual_compare.main())
