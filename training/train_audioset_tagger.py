#!/usr/bin/python3
"""Runs conytrain.audio.audioset_tagger (training/conytrain/audio/audioset_tagger.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import audioset_tagger

if __name__ == "__main__":
    sys.exit(audioset_tagger.main())
