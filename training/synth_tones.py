#!/usr/bin/python3
"""Runs conytrain.data.synth_tones (training/conytrain/data/synth_tones.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.data import synth_tones

if __name__ == "__main__":
    sys.exit(synth_tones.main())
