#!/usr/bin/python3
"""Runs conytrain.audio.yamnet_armnn (training/conytrain/audio/yamnet_armnn.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.audio import yamnet_armnn

if __name__ == "__main__":
    sys.exit(yamnet_armnn.main())
