#!/usr/bin/python3
"""Runs conytrain.golden.attention (training/conytrain/golden/attention.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import attention

if __name__ == "__main__":
    sys.exit(attention.main())
