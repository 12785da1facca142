"""pack_side_by_side (training/conytrain/cnn/vggish.py): the packed network's embedding is the
members' embeddings side by side, for one and several members and odd sizes."""

import unittest

import torch

from conytrain.cnn.vggish import VGGishLike, pack_side_by_side

torch.set_num_threads(1)


class PackSideBySide(unittest.TestCase):
    def check(self, k, conv, fc, hw, final_relu, center_height=False):
        members = []
        for i in range(k):
            torch.manual_seed(100 + i)
            members.append(VGGishLike(conv, fc, hw, final_relu=final_relu,
                                      center_height=center_height).eval())
        packed = pack_side_by_side(members).eval()
        x = torch.randn(5, *hw, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            want = torch.cat([m(x) for m in members], dim=1)
            got = packed(x)
        self.assertEqual(got.shape, (5, k * fc[-1]))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        # the zero blocks are really zero: a member's weights never reach another's slice
        w = [m for m in packed.embeddings if isinstance(m, torch.nn.Linear)][-1].weight
        n = w.shape[1] // k
        for a in range(k):
            for b in range(k):
                if a != b:
                    blk = w[a * fc[-1]:(a + 1) * fc[-1], b * n:(b + 1) * n]
                    self.assertEqual(float(blk.abs().max()), 0.0)

    def test_two_members_default_audio_layout(self):
        self.check(2, (16, "M", 32, "M", 48, 48, "M", 64, 64, "M"), (128, 128, 32), (96, 64), False)

    def test_one_member_is_itself(self):
        self.check(1, (4, "M", 6, "M"), (10, 3), (8, 12), True)

    def test_three_members_odd_sizes(self):
        self.check(3, (3, "M", 5, 5, "M"), (7, 9, 4), (12, 20), False)

    def test_centred_members_pack_centred_and_mixed_ones_are_refused(self):
        self.check(2, (4, "M", 6, "M"), (10, 3), (8, 12), False, center_height=True)
        mixed = [VGGishLike((4, "M"), (3,), (8, 12), center_height=c) for c in (True, False)]
        with self.assertRaisesRegex(ValueError, "center_height"):
            pack_side_by_side(mixed)


if __name__ == "__main__":
    unittest.main()
