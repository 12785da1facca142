"""train_epochs with --grad-clip: the clipped gradient is what the optimiser steps with."""

import unittest

import torch

from conytrain.ref.model import ConyEncoderClassifier
from conytrain.train import train_epochs


def tiny(seed=0):
    torch.manual_seed(seed)
    return ConyEncoderClassifier(4, 8, 2, 16, 1, 4, 2, "cony", ["a", "b"])


class ConstantWindows:
    """Random windows all labelled class 0."""

    def __init__(self):
        self.g = torch.Generator().manual_seed(1)

    def batch(self, size):
        return (torch.randn(size, 4, 4, generator=self.g), torch.zeros(size, dtype=torch.long),
                torch.zeros(size, dtype=torch.long))


class GradClip(unittest.TestCase):
    def test_clipped_gradient_reaches_the_optimiser(self):
        # --grad-clip: a norm far below AdamW's eps leaves the weights where they were
        def moved(clip):
            model = tiny()
            before = [p.detach().clone() for p in model.parameters()]
            train_epochs(model, ConstantWindows(), 1, 10, 16, 1e-2, 0.0, log=lambda m: None,
                         grad_clip=clip)
            return max((p.detach() - b).abs().max().item()
                       for p, b in zip(model.parameters(), before))
        self.assertGreater(moved(None), 1e-2)
        self.assertLess(moved(1e-14), 1e-5)
