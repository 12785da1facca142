"""train_default_audio.WeightAverage and reestimate_batch_norm (--cnn-ema): the average
follows the closed form of an exponential moving average and leaves the live weights
alone until copied; the re-estimated batch-norm statistics are the plain mean and
(unbiased) variance of what each BatchNorm saw over all batches, not an exponential
average dominated by the last one."""

import unittest

import torch
from torch import nn

from conytrain.audio import train_default as tda

torch.set_num_threads(1)


class WeightAverageTest(unittest.TestCase):
    def test_closed_form(self):
        model = nn.Linear(3, 2)
        with torch.no_grad():
            model.weight.fill_(1.0)
            model.bias.fill_(0.0)
        ema = tda.WeightAverage(model, 0.5)
        for value in (2.0, 4.0, 8.0):
            with torch.no_grad():
                model.weight.fill_(value)
            ema.update(model)
        # 1 -> 0.5*1 + 0.5*2 = 1.5 -> 2.75 -> 5.375
        self.assertTrue(torch.allclose(ema.params["weight"], torch.full((2, 3), 5.375)))
        self.assertTrue(torch.equal(model.weight, torch.full((2, 3), 8.0)))  # untouched
        ema.copy_to(model)
        self.assertTrue(torch.allclose(model.weight, torch.full((2, 3), 5.375)))
        self.assertTrue(torch.equal(model.bias, torch.zeros(2)))


class ReestimateBatchNormTest(unittest.TestCase):
    def test_plain_average_over_batches(self):
        model = nn.Sequential(nn.Conv2d(1, 2, 1, bias=False), nn.BatchNorm2d(2))
        with torch.no_grad():
            model[0].weight.fill_(1.0)
        g = torch.Generator().manual_seed(1)
        # batches of very different scale: an exponential average would favour the last
        batches = [torch.randn(4, 1, 3, 5, generator=g) * s + s for s in (1.0, 5.0, 0.5)]
        model[1].running_mean.fill_(123.0)      # stale statistics must not survive
        it = iter(batches)
        seen = tda.reestimate_batch_norm(model, lambda: next(it), batches=3)
        self.assertEqual(seen, 12)
        self.assertFalse(model.training)
        per_batch_mean = torch.stack([b.mean() for b in batches])
        per_batch_var = torch.stack([b.var(unbiased=True) for b in batches])
        bn = model[1]
        for c in range(2):
            self.assertAlmostEqual(bn.running_mean[c].item(), per_batch_mean.mean().item(),
                                   places=5)
            self.assertAlmostEqual(bn.running_var[c].item(), per_batch_var.mean().item(),
                                   places=4)


if __name__ == "__main__":
    unittest.main()
