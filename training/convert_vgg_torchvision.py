#!/usr/bin/python3
"""Runs conytrain.cnn.convert_vgg_torchvision (training/conytrain/cnn/convert_vgg_torchvision.py): its docstring and --help tell
what it does and how."""

import sys

from conytrain.cnn import convert_vgg_torchvision

if __name__ == "__main__":
    sys.exit(convert_vgg_torchvision.main())
