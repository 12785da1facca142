#!/usr/bin/python3
"""Runs conytrain.data.event_streams (training/conytrain/data/event_streams.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.data import event_streams

if __name__ == "__main__":
    sys.exit(event_streams.main())
