#!/usr/bin/python3
"""Runs conytrain.cnn.convert_tflite (training/conytrain/cnn/convert_tflite.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.cnn import convert_tflite

if __name__ == "__main__":
    sys.exit(convert_tflite.main())
