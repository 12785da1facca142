#!/usr/bin/python3
"""Runs conytrain.video.eval (training/conytrain/video/eval.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.video import eval

if __name__ == "__main__":
    sys.exit(eval.main())
