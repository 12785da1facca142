#!/usr/bin/python3
"""Runs conytrain.audio.landmark_sweep (training/conytrain/audio/landmark_sweep.py): its
docstring and --help tell what it does and how."""

from conytrain.audio import landmark_sweep

if __name__ == "__main__":
    landmark_sweep.main()
