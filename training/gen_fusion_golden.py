#!/usr/bin/python3
"""Runs conytrain.golden.fusion (training/conytrain/golden/fusion.py): its docstring tells
what it does and how."""

import sys

from conytrain.golden import fusion

if __name__ == "__main__":
    sys.exit(fusion.main())
