"""fold_batch_norm (training/conytrain/cnn/vggish.py): a VGGishLike trained with batch
normalisation, folded into the plain layout libcony loads, computes the same embedding in
eval mode, whatever the running statistics and affine parameters."""

import unittest

import torch
from torch import nn

from conytrain.cnn.vggish import VGGishLike, fold_batch_norm, layout

torch.set_num_threads(1)


class FoldBatchNorm(unittest.TestCase):
    def check(self, conv, fc, hw, center_height):
        torch.manual_seed(3)
        net = VGGishLike(conv, fc, hw, final_relu=False, center_height=center_height,
                         batch_norm=True)
        bns = [m for m in net.features if isinstance(m, nn.BatchNorm2d)]
        self.assertEqual(len(bns), sum(1 for c in conv if c != "M"))
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for bn in bns:   # statistics and affine parameters far from the identity
                n = bn.num_features
                bn.running_mean.copy_(torch.randn(n, generator=g) * 2)
                bn.running_var.copy_(torch.rand(n, generator=g) * 4 + 0.1)
                bn.weight.copy_(torch.randn(n, generator=g))
                bn.bias.copy_(torch.randn(n, generator=g))
        net.eval()
        plain = fold_batch_norm(net)
        self.assertFalse(any(isinstance(m, nn.BatchNorm2d) for m in plain.modules()))
        self.assertEqual(layout(plain), layout(net))
        self.assertEqual(plain.center_height, center_height)
        x = torch.randn(4, *hw, generator=g) * 3 + 1
        with torch.no_grad():
            torch.testing.assert_close(plain(x), net(x), rtol=1e-4, atol=1e-4)
        # the folded state has exactly the plain layout's names (features.K.*, embeddings.K.*)
        self.assertEqual(set(plain.state_dict()), set(VGGishLike(conv, fc, hw).state_dict()))

    def test_default_audio_layout_centred(self):
        self.check((16, "M", 32, "M", 48, 48, "M", 64, 64, "M"), (128, 128, 32), (96, 64), True)

    def test_small_layout(self):
        self.check((3, "M", 5, 5, "M"), (7, 4), (12, 20), False)


if __name__ == "__main__":
    unittest.main()
