"""Distillation from seed ensembles (yamnet.py --teachers, rule 22): train_epochs learns
the teacher's probabilities in proportion to --distill, and ensemble() averages the
softmax of the teacher checkpoints it finds (WORK/TAG-teacher-sSEED.pt); --grad-clip's
clipped gradient is what the optimiser steps with."""

import argparse
import os
import tempfile
import unittest

import torch

from conytrain.audio import yamnet
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint
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


def says_b(x, off):
    """A teacher sure of class 1, whatever the window."""
    return torch.tensor([[0.0, 1.0]]).expand(x.shape[0], 2)


class Distillation(unittest.TestCase):
    def p_b(self, distill, teacher=says_b):
        model = tiny()
        train_epochs(model, ConstantWindows(), 3, 20, 16, 1e-2, 0.0, log=lambda m: None,
                     teacher=teacher, distill=distill)
        model.eval()
        with torch.no_grad():
            return model(torch.randn(64, 4, 4)).softmax(1)[:, 1].mean().item()

    def test_the_teacher_term_pulls_towards_its_probabilities(self):
        self.assertLess(self.p_b(0.0), 0.1)       # labels only: class 0
        self.assertLess(self.p_b(0.5, None), 0.1)  # no teacher: distill has no effect
        self.assertGreater(self.p_b(0.9), 0.7)    # mostly the teacher: class 1
        self.assertGreater(self.p_b(0.9), self.p_b(0.5))

    def test_ensemble_averages_the_teacher_checkpoints(self):
        with tempfile.TemporaryDirectory() as work:
            members = [tiny(s) for s in (3, 4)]
            for s, m in zip((3, 4), members):
                save_checkpoint(m, os.path.join(work, f"val-teacher-s{s}.pt"))
            args = argparse.Namespace(teachers=[3, 4], work=work, distill=0.5)
            probabilities = yamnet.ensemble(args, [], ["a", "b"], "val")
            x, off = torch.randn(5, 4, 4), torch.zeros(5, dtype=torch.long)
            with torch.no_grad():
                want = sum(m.eval()(x, off).softmax(1) for m in members) / 2
                self.assertTrue(torch.allclose(probabilities(x, off), want, atol=1e-6))
            self.assertIsNone(yamnet.ensemble(argparse.Namespace(teachers=[]), [], [], "val"))


if __name__ == "__main__":
    unittest.main()


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
