#!/usr/bin/python3
"""Runs conytrain.bench.video (training/conytrain/bench/video.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.bench import video

if __name__ == "__main__":
    sys.exit(video.main())
