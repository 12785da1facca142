#!/usr/bin/python3
"""Runs conytrain.cnn.convert_vggish (training/conytrain/cnn/convert_vggish.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.cnn import convert_vggish

if __name__ == "__main__":
    sys.exit(convert_vggish.main())
