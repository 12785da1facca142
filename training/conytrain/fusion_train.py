"""Training a fused model (ref/fusion.py) with conytrain.train's window sampler and loop.

Data are packed token streams (FusedClassifier.pack: each input's token and one presence
flag per input, at the fused step rate, as conyfuse would emit them), so the ordinary
WindowSampler cuts training windows from them. DropSampler then drops inputs at random,
as a muted microphone or an unplugged camera would (an input absent for a whole window,
or for single steps), which is what trains the absent tokens; PackedModel lets
train.train_epochs and train.evaluate call the fused model on packed windows.

    sampler = DropSampler(WindowSampler(packed, labels, n, T), model, p_window=0.2, p_step=0.1)
    train_epochs(PackedModel(model), sampler, ...)
"""

import numpy as np
import torch
import torch.nn as nn


class PackedModel(nn.Module):
    """model(x, offsets) on packed windows, for train.train_epochs / train.evaluate."""

    def __init__(self, fused):
        super().__init__()
        self.fused = fused

    @property
    def config(self):
        return self.fused.config

    def forward(self, x, offsets=None, override=None):
        return self.fused.forward_packed(x, offsets, override)


class DropSampler:
    """Wraps a sampler of packed windows: each window loses each input entirely with
    probability p_window (never all inputs of a window) and single steps of each input
    with probability p_step; a dropped token's values are zeroed with its flag."""

    def __init__(self, sampler, fused, p_window=0.2, p_step=0.1, seed=0):
        self.sampler, self.fused = sampler, fused
        self.p_window, self.p_step = p_window, p_step
        self.rng = np.random.default_rng(seed)

    def batch(self, size):
        x, off, y = self.sampler.batch(size)
        B, w, _ = x.shape
        n = len(self.fused.names)
        keep = self.rng.random((B, w, n)) >= self.p_step
        whole = self.rng.random((B, n)) < self.p_window
        whole[whole.all(axis=1)] = False       # one sense at least
        keep &= ~whole[:, None, :]
        tokens, present = self.fused.unpack(x)
        for i, name in enumerate(self.fused.names):
            present[name] = present[name] & torch.from_numpy(keep[:, :, i])
        return self.fused.pack(tokens, present), off, y
