#!/usr/bin/python3
"""Runs conytrain.data.build (training/conytrain/data/build.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.data import build

if __name__ == "__main__":
    sys.exit(build.cli())
