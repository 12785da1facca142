#!/usr/bin/python3
"""Runs conytrain.cnn.imagenet_armnn (training/conytrain/cnn/imagenet_armnn.py): its docstring
and --help tell what it does and how."""

import sys

from conytrain.cnn import imagenet_armnn

if __name__ == "__main__":
    sys.exit(imagenet_armnn.main())
