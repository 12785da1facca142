#!/usr/bin/python3
"""Runs conytrain.golden.model (training/conytrain/golden/model.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.golden import model

if __name__ == "__main__":
    sys.exit(model.main())
