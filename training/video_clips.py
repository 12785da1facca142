#!/usr/bin/python3
"""Runs conytrain.video.clips (training/conytrain/video/clips.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.video import clips

if __name__ == "__main__":
    sys.exit(clips.main())
