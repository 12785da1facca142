#!/usr/bin/python3
"""Runs conytrain.golden.mobilenet (training/conytrain/golden/mobilenet.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import mobilenet

if __name__ == "__main__":
    sys.exit(mobilenet.main())
