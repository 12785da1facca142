#!/usr/bin/python3
"""Runs conytrain.av.cli (training/conytrain/av/cli.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.av import cli

if __name__ == "__main__":
    sys.exit(cli.main())
