#!/usr/bin/python3
"""Runs conytrain.export (training/conytrain/export.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain import export

if __name__ == "__main__":
    sys.exit(export.main())
