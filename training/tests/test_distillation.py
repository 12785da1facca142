"""train_default_audio.distillation_loss and load_patch_classifier (--distill): the target
is the mean of the teachers' softened distributions, a student that already matches it
gets no gradient, and a checkpoint without a classifier head is refused by name;
distillation_mask leaves the teachers out for skipped families and for the validation
recordings a refit (--train-on-val, refit_on_validation) trains on."""

import os
import tempfile
import unittest

import torch
import torch.nn.functional as F

from conytrain.audio import train_default as tda

torch.set_num_threads(1)

CONV = (4, "M", 4, "M", 4, 4, "M", 4, 4, "M")
FC = (8, 8, 4)


class FixedTeacher(torch.nn.Module):
    """Returns the same logits for every patch."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, xb):
        return self.logits.expand(xb.shape[0], -1)


class Distillation(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(3)
        self.xb = torch.randn(5, tda.PATCH, tda.N_MELS)

    def test_target_is_the_mean_of_the_softened_teachers(self):
        a, b = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[-1.0, 1.0, 0.5]])
        temp = 2.0
        target = (F.softmax(a / temp, 1) + F.softmax(b / temp, 1)) / 2
        logits = torch.randn(5, 3)
        want = -(target * F.log_softmax(logits / temp, 1)).sum(1).mean() * temp * temp
        got = tda.distillation_loss(logits, self.xb, [FixedTeacher(a), FixedTeacher(b)], temp)
        self.assertAlmostEqual(got.item(), want.item(), places=5)

    def test_per_patch_losses_average_to_the_loss(self):
        # --distill-skip-families weighs the teachers' term per patch
        a = torch.tensor([[2.0, 0.0, -1.0]])
        logits = torch.randn(5, 3)
        per = tda.distillation_loss(logits, self.xb, [FixedTeacher(a)], 2.0, reduce=False)
        self.assertEqual(tuple(per.shape), (5,))
        self.assertAlmostEqual(per.mean().item(),
                               tda.distillation_loss(logits, self.xb, [FixedTeacher(a)], 2.0).item(), places=5)

    def test_matching_student_gets_no_gradient(self):
        teacher = torch.tensor([[1.5, -0.5, 0.25, 0.0]])
        logits = teacher.expand(5, -1).clone().requires_grad_(True)
        tda.distillation_loss(logits, self.xb, [FixedTeacher(teacher)] * 2, 3.0).backward()
        self.assertLess(logits.grad.abs().max().item(), 1e-6)
        other = torch.zeros(5, 4, requires_grad=True)
        tda.distillation_loss(other, self.xb, [FixedTeacher(teacher)], 3.0).backward()
        self.assertGreater(other.grad.abs().max().item(), 1e-3)

    def test_teacher_round_trip_and_headless_checkpoint_refused(self):
        with tempfile.TemporaryDirectory() as work:
            m = tda.PatchClassifier(CONV, FC, 6, 0.0).eval()
            torch.save({"state_dict": m.state_dict(), "conv": CONV, "fc": FC},
                       os.path.join(work, "cnn.pt"))
            t = tda.load_patch_classifier(work, 6)
            with torch.no_grad():
                self.assertTrue(torch.allclose(t(self.xb), m(self.xb)))
            torch.save({"state_dict": {"cnn." + k: v for k, v in m.cnn.state_dict().items()},
                        "conv": CONV, "fc": FC}, os.path.join(work, "cnn.pt"))
            with self.assertRaisesRegex(ValueError, "cnn.pt has no classifier head"):
                tda.load_patch_classifier(work, 6)


class DistillationMask(unittest.TestCase):
    def test_skipped_families_and_refit_recordings_learn_from_labels_only(self):
        rows = [dict(path="a.wav", family="real_noise", group="g1", split="train"),
                dict(path="b.wav", family="synth_music", group="g2", split="train"),
                dict(path="c.wav", family="real_noise", group="g3", split="val"),
                dict(path="d.wav", family="real_noise", group="g4", split="test")]
        rows = tda.refit_on_validation(rows)
        self.assertEqual([r["split"] for r in rows], ["train", "train", "train", "test"])
        train = [r for r in rows if r["split"] == "train"]
        self.assertEqual(tda.distillation_mask(train, {"synth_music"}).tolist(), [1.0, 0.0, 0.0])
        self.assertEqual(tda.distillation_mask(train, set()).tolist(), [1.0, 1.0, 0.0])


if __name__ == "__main__":
    unittest.main()
