#!/usr/bin/python3
"""Runs conytrain.audio.calibrate (training/conytrain/audio/calibrate.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import calibrate

if __name__ == "__main__":
    sys.exit(calibrate.main())
