#!/usr/bin/python3
"""Runs conytrain.data.unpack_archives (training/conytrain/data/unpack_archives.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.data import unpack_archives

if __name__ == "__main__":
    sys.exit(unpack_archives.main())
