#!/usr/bin/python3
"""Runs conytrain.data.mine_audioset (training/conytrain/data/mine_audioset.py): its
docstring and --help tell what it does and how."""

import sys

from conytrain.data import mine_audioset

if __name__ == "__main__":
    sys.exit(mine_audioset.main())
