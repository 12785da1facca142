#!/usr/bin/python3
"""Runs conytrain.audio.own (training/conytrain/audio/own.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import own

if __name__ == "__main__":
    sys.exit(own.main())
