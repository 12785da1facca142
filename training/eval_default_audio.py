#!/usr/bin/python3
"""Runs conytrain.audio.eval_default (training/conytrain/audio/eval_default.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import eval_default

if __name__ == "__main__":
    sys.exit(eval_default.main())
