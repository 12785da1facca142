#!/usr/bin/python3
"""Runs conytrain.audio.yamnet (training/conytrain/audio/yamnet.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import yamnet

if __name__ == "__main__":
    sys.exit(yamnet.main())
