"""Self-checks of the float64 reference (training/conytrain/ref).

Run from the repository root:  /usr/bin/python3 -m unittest discover -s training/tests
or directly:                   /usr/bin/python3 training/tests/test_reference.py
"""

import unittest

import torch

from conytrain.ref import attention as ref

torch.set_num_threads(1)
F64 = torch.float64


def make_weights(d, gen, scale=1.0):
    s = scale / d ** 0.5
    return {
        "in_proj_weight": torch.randn(3 * d, d, generator=gen, dtype=F64) * s,
        "in_proj_bias": torch.randn(3 * d, generator=gen, dtype=F64) * 0.1,
        "out_proj.weight": torch.randn(d, d, generator=gen, dtype=F64) * s,
        "out_proj.bias": torch.randn(d, generator=gen, dtype=F64) * 0.1,
    }


def torch_mha(x, weights, heads):
    """torch.nn.MultiheadAttention on windows x (B, w, d): all rows (B, w, d)."""
    d = x.shape[-1]
    mha = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=F64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(weights["in_proj_weight"])
        mha.in_proj_bias.copy_(weights["in_proj_bias"])
        mha.out_proj.weight.copy_(weights["out_proj.weight"])
        mha.out_proj.bias.copy_(weights["out_proj.bias"])
        out, _ = mha(x, x, x, need_weights=False)
    return out


def rel_err(a, b):
    return ((a - b).abs().max() / max(1.0, b.abs().max().item())).item()


class ReferenceTest(unittest.TestCase):
    def setUp(self):
        self.gen = torch.Generator().manual_seed(1234)

    def randx(self, *shape, scale=1.0):
        return torch.randn(*shape, generator=self.gen, dtype=F64) * scale

    def test_regular_equals_torch_mha(self):
        for d, heads, w in ((8, 1, 5), (12, 3, 7), (16, 4, 1)):
            wts = make_weights(d, self.gen)
            x = self.randx(3, w, d)
            want = torch_mha(x, wts, heads)
            got_all = ref.mha_window(x, wts, "regular", heads, retroactive=True)
            got_last = ref.mha_window(x, wts, "regular", heads)
            self.assertLess(rel_err(got_all, want), 1e-12)
            self.assertLess(rel_err(got_last, want[:, -1]), 1e-12)
            self.assertEqual(tuple(got_last.shape), (3, d))

    def test_nystrom_with_many_landmarks_is_regular(self):
        d, heads = 8, 2
        wts = make_weights(d, self.gen)
        for w, m in ((3, 5), (5, 5)):
            x = self.randx(2, w, d)
            want = ref.mha_window(x, wts, "regular", heads, retroactive=True)
            got = ref.mha_window(x, wts, "nystrom", heads, landmarks=m, retroactive=True)
            self.assertLess(rel_err(got, want), 1e-10)
        # m = w through the Nyström product itself (each token its own landmark).
        x = self.randx(2, 4, d)
        q, k, v = ref.project(x, wts, heads)
        o = ref.nystrom_attention(q, k, v, q, k)
        self.assertLess(rel_err(o, ref.softmax_attention(q, k, v)), 1e-9)

    def test_nystrom_fixed_with_all_tokens_is_regular(self):
        d, heads, w = 12, 3, 6
        wts = make_weights(d, self.gen)
        x = self.randx(1, w, d)
        q, k, _ = ref.project(x, wts, heads)
        for pinv in ("exact",):
            got = ref.mha_window(x, wts, "nystrom-fixed", heads, retroactive=True, pinv=pinv,
                                 q_landmarks=q[0], k_landmarks=k[0])
            want = ref.mha_window(x, wts, "regular", heads, retroactive=True)
            self.assertLess(rel_err(got, want), 1e-9)

    def test_nystrom_differs_from_regular(self):
        # Sanity: the approximation is not accidentally exact for w > m.
        d, heads = 8, 2
        wts = make_weights(d, self.gen, scale=2.0)
        x = self.randx(1, 9, d)
        a = ref.mha_window(x, wts, "nystrom", heads, landmarks=3)
        b = ref.mha_window(x, wts, "regular", heads)
        self.assertGreater(rel_err(a, b), 1e-4)

    def test_vcc(self):
        d, heads, w = 8, 2, 13
        wts = make_weights(d, self.gen, scale=2.0)
        x = self.randx(1, w, d)
        exact = ref.mha_window(x, wts, "regular", heads)
        q, k, _ = ref.project(x, wts, heads)
        for budget, block, tail in ((13, 1, 0), (20, 4, 3), (4, 1, 0), (6, 2, 2), (1, 1, 0)):
            segs = sorted(ref.vcc_partition(q[0, :, -1], k[0], budget, block, tail))
            # a partition of the window into at most r segments, the tail exact
            self.assertEqual([lo for lo, _ in segs[1:]], [hi for _, hi in segs[:-1]])
            self.assertEqual((segs[0][0], segs[-1][1]), (0, w))
            self.assertLessEqual(len(segs), budget)
            self.assertTrue(all(hi - lo == 1 for lo, hi in segs[len(segs) - tail:]))
            got = ref.mha_window(x, wts, "vcc", heads, vcc_budget=budget, vcc_block=block,
                                 vcc_exact_tail=tail)
            if budget >= w:
                self.assertLess(rel_err(got, exact), 1e-12)
            else:
                self.assertGreater(rel_err(got, exact), 1e-4)
        # constant windows are exact at any budget
        xc = self.randx(1, 1, d).expand(1, w, d)
        self.assertLess(rel_err(ref.mha_window(xc, wts, "vcc", heads, vcc_budget=1),
                                ref.mha_window(xc, wts, "regular", heads)), 1e-12)
        with self.assertRaises(ValueError):
            ref.mha_window(x, wts, "vcc", heads, retroactive=True)

    def test_segments(self):
        self.assertEqual(ref.segment_sizes(10, 4), [3, 3, 2, 2])
        self.assertEqual(ref.segment_sizes(7, 3), [3, 2, 2])
        it = ref.cony_segments(10, 4)
        segs = [next(it) for _ in range(9)]
        self.assertEqual([s for _, s in segs], [3, 3, 2, 2, 3, 3, 2, 2, 3])
        self.assertEqual([a for a, _ in segs], [0, 3, 6, 8, 10, 13, 16, 18, 20])
        # Warm-up: newest segment incomplete.
        self.assertEqual(ref.cony_held_segments(0, 10, 4), [(0, 1)])
        self.assertEqual(ref.cony_held_segments(4, 10, 4), [(0, 3), (3, 2)])
        self.assertEqual(ref.cony_held_segments(9, 10, 4), [(0, 3), (3, 3), (6, 2), (8, 2)])
        # Stale landmarks between updates; any m consecutive segments hold n tokens.
        self.assertEqual(ref.cony_held_segments(11, 10, 4), [(0, 3), (3, 3), (6, 2), (8, 2)])
        self.assertEqual(ref.cony_held_segments(12, 10, 4), [(3, 3), (6, 2), (8, 2), (10, 3)])
        for t in range(9, 60):
            held = ref.cony_held_segments(t, 10, 4)
            self.assertEqual(sum(s for _, s in held), 10)
            self.assertLessEqual(held[-1][0] + held[-1][1] - 1, t)

    def test_cony_at_updates_is_nystrom(self):
        for n, m, heads in ((6, 3, 1), (8, 4, 2), (10, 4, 2), (7, 3, 1)):
            d = 8
            wts = make_weights(d, self.gen)
            x = self.randx(3 * n, d)
            for retro in (False, True):
                cony = ref.attention_steps(x, wts, "cony", heads, n, landmarks=m,
                                           retroactive=retro)
                nys = ref.attention_steps(x, wts, "nystrom", heads, n, landmarks=m,
                                          retroactive=retro)
                ends = set()
                for start, size in ref.cony_segments(n, m):
                    if start + size - 1 >= 3 * n:
                        break
                    ends.add(start + size - 1)
                checked = 0
                for t in range(n - 1, 3 * n):
                    if t in ends and (n % m == 0 or t == n - 1):
                        self.assertLess(rel_err(cony[t], nys[t]), 1e-9, (n, m, t, retro))
                        checked += 1
                    elif t not in ends:
                        # Between updates the landmarks are stale: not the window's Nyström.
                        self.assertGreater(rel_err(cony[t], nys[t]), 1e-9, (n, m, t, retro))
                self.assertGreater(checked, 2 if n % m == 0 else 0)

    def test_cony_landmarks_by_hand(self):
        # n = 7, m = 3: segments [0,2] [3,4] [5,6] [7,9] [10,11] [12,13] ...; at t = 12 the
        # held landmarks are [5,6], [7,9], [10,11] (stale: token 5 has left the window 6..12).
        n, m, heads, d = 7, 3, 1, 8
        wts = make_weights(d, self.gen)
        x = self.randx(14, d)
        got = ref.attention_steps(x, wts, "cony", heads, n, landmarks=m)
        q, k, _ = ref.project(x, wts, heads)
        ql = torch.stack([q[:, 5:7].mean(1), q[:, 7:10].mean(1), q[:, 10:12].mean(1)], 1)
        kl = torch.stack([k[:, 5:7].mean(1), k[:, 7:10].mean(1), k[:, 10:12].mean(1)], 1)
        want = ref.mha_window(x[6:13][None], wts, "nystrom", heads, kernel_landmarks=(ql[None], kl[None]))
        self.assertLess(rel_err(got[12], want[0]), 1e-12)

    def test_continual_and_fixed_streams(self):
        d, heads, n, m = 8, 2, 6, 3
        wts = make_weights(d, self.gen)
        x = self.randx(15, d)
        ql = self.randx(heads, m, d // heads)
        kl = self.randx(heads, m, d // heads)
        for retro in (False, True):
            a = ref.attention_steps(x, wts, "continual", heads, n, retroactive=retro)
            b = ref.attention_steps(x, wts, "regular", heads, n, retroactive=retro)
            self.assertTrue(torch.equal(a, b))
            a = ref.attention_steps(x, wts, "cony-fixed", heads, n, landmarks=m, retroactive=retro,
                                    q_landmarks=ql, k_landmarks=kl)
            b = ref.attention_steps(x, wts, "nystrom-fixed", heads, n, landmarks=m,
                                    retroactive=retro, q_landmarks=ql, k_landmarks=kl)
            self.assertTrue(torch.equal(a, b))
        # Retroactive layout: n rows, zero before the stream start, last row = single.
        r = ref.attention_steps(x, wts, "regular", heads, n, retroactive=True)
        s = ref.attention_steps(x, wts, "regular", heads, n)
        self.assertEqual(tuple(r.shape), (15, n, d))
        self.assertTrue(torch.equal(r[2, : n - 3], torch.zeros(n - 3, d, dtype=F64)))
        self.assertFalse(torch.equal(r[2, n - 3], torch.zeros(d, dtype=F64)))
        self.assertLess(rel_err(r[:, -1], s), 1e-14)
        # First step: one token attends to itself -> out_proj(v_0).
        q, k, v = ref.project(x[:1], wts, heads)
        self.assertLess(rel_err(s[0], ref.merge_heads(v, wts)[0]), 1e-14)

    def test_iterative_pinv_converges(self):
        gen = self.gen
        a = torch.eye(4, dtype=F64) + 0.2 * torch.rand(3, 4, 4, generator=gen, dtype=F64)
        exact = ref.pinv_exact(a)
        err6 = (ref.pinv_iterative(a, 6) - exact).abs().max().item()
        err30 = (ref.pinv_iterative(a, 30) - exact).abs().max().item()
        self.assertLess(err30, 1e-12)
        self.assertLessEqual(err30, err6)
        # Per-matrix scale: scaling one matrix of the batch does not change the others.
        b = a.clone()
        b[0] *= 100
        self.assertTrue(torch.allclose(ref.pinv_iterative(b, 6)[1:], ref.pinv_iterative(a, 6)[1:],
                                       rtol=0, atol=0))
        # Softmax kernels from real landmarks.
        wts = make_weights(8, gen, scale=3.0)
        x = self.randx(1, 12, 8)
        q, k, _ = ref.project(x, wts, 2)
        p = ref.segment_mean_matrix(ref.segment_sizes(12, 3))
        kern = ref.softmax_kernel(p @ q, p @ k)
        self.assertLess((ref.pinv_iterative(kern, 40) - ref.pinv_exact(kern)).abs().max().item(),
                        1e-8)

    def test_large_scores_finite(self):
        d, heads = 8, 2
        wts = make_weights(d, self.gen, scale=1.0)
        x = self.randx(1, 6, d, scale=200.0)
        out = ref.mha_window(x, wts, "regular", heads, retroactive=True)
        self.assertTrue(torch.isfinite(out).all())

    def test_float32_and_gradients(self):
        d, heads = 8, 2
        wts = {k: v.float().requires_grad_(True) for k, v in make_weights(d, self.gen).items()}
        x = self.randx(2, 7, d).float().requires_grad_(True)
        ql = self.randx(heads, 3, d // heads).float().requires_grad_(True)
        kl = self.randx(heads, 3, d // heads).float().requires_grad_(True)
        for variant, kw in (("regular", {}), ("nystrom", {"landmarks": 3}),
                            ("nystrom", {"landmarks": 3, "pinv": "iterative"}),
                            ("nystrom-fixed", {"q_landmarks": ql, "k_landmarks": kl})):
            out = ref.mha_window(x, wts, variant, heads, **kw)
            self.assertEqual(out.dtype, torch.float32)
            out.square().sum().backward()
            self.assertTrue(torch.isfinite(x.grad).all())
            self.assertTrue(torch.isfinite(wts["in_proj_weight"].grad).all())
        self.assertTrue(torch.isfinite(ql.grad).all() and ql.grad.abs().sum() > 0)

    def test_gradcheck_float64(self):
        d, heads = 4, 2
        wts = make_weights(d, self.gen)
        x = self.randx(1, 5, d).requires_grad_(True)
        for variant in ("regular", "nystrom"):
            f = lambda inp: ref.mha_window(inp, wts, variant, heads, landmarks=2)  # noqa: E731
            self.assertTrue(torch.autograd.gradcheck(f, (x,)))


if __name__ == "__main__":
    unittest.main()
