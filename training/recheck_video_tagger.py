#!/usr/bin/python3
"""Runs conytrain.video.recheck (training/conytrain/video/recheck.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.video import recheck

if __name__ == "__main__":
    sys.exit(recheck.main())
