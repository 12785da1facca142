#!/usr/bin/python3
"""Runs conytrain.audio.mel (training/conytrain/audio/mel.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import mel

if __name__ == "__main__":
    sys.exit(mel.main())
