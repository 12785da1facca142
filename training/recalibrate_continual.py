#!/usr/bin/python3
"""Runs conytrain.audio.recalibrate (training/conytrain/audio/recalibrate.py): its docstring and
--help tell what it does and how."""

import sys

from conytrain.audio import recalibrate

if __name__ == "__main__":
    sys.exit(recalibrate.main())
