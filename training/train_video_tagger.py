#!/usr/bin/python3
"""Runs conytrain.video.tagger (training/conytrain/video/tagger.py): its docstring and
--help tell what it does and how."""

import sys

from conytrain.video import tagger

if __name__ == "__main__":
    sys.exit(tagger.main())
