"""Reference implementation of every attention variant of docs/attention.md.

Two entry points:

* :func:`mha_window` -- non-continual multi-head attention over whole windows,
  batched and differentiable (float32 or float64). The training model uses it, and it
  defines what the C runtime's ``cony_attention_forward_window`` computes.
* :func:`attention_steps` -- what a stepped layer outputs at every step of a token
  stream, written directly from the windowed definitions (a plain loop over the steps,
  recomputing everything from scratch). The golden files are made with it.

Layout follows ``torch.nn.MultiheadAttention``: ``in_proj_weight`` (3d, d) =
[W_q; W_k; W_v], ``in_proj_bias`` (3d), ``out_proj.weight`` (d, d), ``out_proj.bias``
(d). Head h of H uses the components h*hd .. (h+1)*hd of q, k and v (hd = d / H).
Scores are a.b / sqrt(hd).
"""

import heapq
import math

import torch

# The variants a model can be trained with. "vcc" (inference only, single output) is
# defined below too: vcc_attention, mha_window(..., "vcc") and attention_steps.
VARIANTS = ("regular", "continual", "nystrom", "nystrom-fixed", "cony", "cony-fixed")

# The non-continual function each variant computes (docs/attention.md).
WINDOWED = {
    "regular": "regular",
    "continual": "regular",
    "nystrom": "nystrom",
    "nystrom-fixed": "nystrom-fixed",
    "cony": "nystrom",
    "cony-fixed": "nystrom-fixed",
    "vcc": "vcc",
}

WEIGHT_NAMES = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")


# --------------------------------------------------------------------------- projections

def project(x, weights, heads):
    """Projects tokens to per-head queries, keys and values.

    x: (..., L, d). weights: mapping with the nn.MultiheadAttention tensors.
    Returns q, k, v, each (..., H, L, hd), in the projected space (no 1/sqrt(hd) yet).
    """
    d = x.shape[-1]
    if d % heads != 0:
        raise ValueError(f"d = {d} is not a multiple of heads = {heads}")
    hd = d // heads
    w = weights["in_proj_weight"].to(x.dtype)
    b = weights["in_proj_bias"].to(x.dtype)
    if w.shape != (3 * d, d) or b.shape != (3 * d,):
        raise ValueError(f"in_proj_weight/in_proj_bias: expected ({3 * d}, {d})/({3 * d},), "
                         f"got {tuple(w.shape)}/{tuple(b.shape)}")
    qkv = x @ w.transpose(0, 1) + b                      # (..., L, 3d)
    out = []
    for part in qkv.split(d, dim=-1):                    # q, k, v: (..., L, d)
        part = part.reshape(*part.shape[:-1], heads, hd)  # (..., L, H, hd)
        out.append(part.transpose(-2, -3))               # (..., H, L, hd)
    return tuple(out)


def merge_heads(o, weights):
    """Concatenates per-head outputs (..., H, L, hd) and applies out_proj -> (..., L, d)."""
    o = o.transpose(-2, -3)                              # (..., L, H, hd)
    o = o.reshape(*o.shape[:-2], o.shape[-2] * o.shape[-1])
    w = weights["out_proj.weight"].to(o.dtype)
    b = weights["out_proj.bias"].to(o.dtype)
    return o @ w.transpose(0, 1) + b


# --------------------------------------------------------------------------- kernels

def softmax_kernel(a, b):
    """Row softmax of a.b^T / sqrt(hd): a (..., La, hd), b (..., Lb, hd) -> (..., La, Lb).

    torch.softmax subtracts the row maximum, so any score size is safe."""
    hd = a.shape[-1]
    return torch.softmax(a @ b.transpose(-1, -2) / math.sqrt(hd), dim=-1)


# Singular values below PINV_RTOL * sigma_max count as zero. The kernel is built from
# float32 activations; a singular value at double-precision eps relative to the largest
# is noise, and inverting it would multiply 1e-16 differences by 1e16 (docs/attention.md).
PINV_RTOL = 1e-10


def pinv_exact(k):
    """Moore-Penrose pseudo-inverse in float64, per matrix; singular values below
    PINV_RTOL * sigma_max count as zero (libcony's cony_pinv_exact uses the same rule)."""
    return torch.linalg.pinv(k.to(torch.float64), rtol=PINV_RTOL).to(k.dtype)


def pinv_iterative(k, iterations=6):
    """The Nyströmformer iteration (docs/attention.md), for a batch of square matrices.

    V0 = K^T / (max_j sum_i |K_ij| * max_i sum_j |K_ij|) with the scale taken per
    matrix (per head), then `iterations` times V <- V (13I - KV (15I - KV (7I - KV))) / 4.
    """
    m = k.shape[-1]
    if k.shape[-2] != m:
        raise ValueError("iterative pseudo-inverse needs square matrices")
    absk = k.abs()
    max_col = absk.sum(dim=-2).amax(dim=-1)              # max_j sum_i |K_ij|
    max_row = absk.sum(dim=-1).amax(dim=-1)              # max_i sum_j |K_ij|
    v = k.transpose(-1, -2) / (max_col * max_row)[..., None, None]
    eye = torch.eye(m, dtype=k.dtype, device=k.device)
    for _ in range(iterations):
        kv = k @ v
        v = 0.25 * (v @ (13 * eye - kv @ (15 * eye - kv @ (7 * eye - kv))))
    return v


def pseudo_inverse(k, method="exact", iterations=6):
    if method == "exact":
        return pinv_exact(k)
    if method == "iterative":
        return pinv_iterative(k, iterations if iterations else 6)
    raise ValueError(f"unknown pinv method {method!r} (exact or iterative)")


def softmax_attention(q, k, v):
    """Exact softmax attention: (..., Lq, hd), (..., Lk, hd), (..., Lk, hd) -> (..., Lq, hd)."""
    return softmax_kernel(q, k) @ v


def nystrom_attention(q, k, v, q_land, k_land, pinv="exact", pinv_iterations=6):
    """The Nyström product with given landmarks.

    softmax(Q K~^T) pinv(softmax(Q~ K~^T)) (softmax(Q~ K^T) V), every softmax over
    scores / sqrt(hd). q: (..., Lq, hd); k, v: (..., Lk, hd); q_land, k_land:
    (..., m, hd), broadcast against the batch dimensions of q.
    """
    k1 = softmax_kernel(q, k_land)                       # (..., Lq, m)
    k2 = softmax_kernel(q_land, k_land)                  # (..., m, m)
    k3 = softmax_kernel(q_land, k)                       # (..., m, Lk)
    return k1 @ (pseudo_inverse(k2, pinv, pinv_iterations) @ (k3 @ v))


def segment_sizes(w, m):
    """Sizes of m contiguous segments of w tokens; the first w mod m hold one extra."""
    base, r = divmod(w, m)
    return [base + 1 if j < r else base for j in range(m)]


def segment_mean_matrix(sizes, dtype=torch.float64, device=None):
    """(len(sizes), sum(sizes)) matrix whose rows average consecutive segments."""
    total = sum(sizes)
    p = torch.zeros(len(sizes), total, dtype=dtype, device=device)
    start = 0
    for j, s in enumerate(sizes):
        p[j, start:start + s] = 1.0 / s
        start += s
    return p


# --------------------------------------------------------------------------- vcc

def vcc_coarse_block(block, u, rc):
    """Smallest block * 2**k whose ceil(u / size) blocks number at most max(1, rc // 2)."""
    b, target = max(block, 1), max(1, rc // 2)
    while -(-u // b) > target:
        b *= 2
    return b


def vcc_partition(q, k, budget, block=1, tail=0):
    """The segments [lo, hi) (window positions, 0 = oldest) vcc uses for query q.

    q: (H, hd) the query; k: (H, w, hd) the window's keys. The newest `tail` tokens are
    one segment each; the other u tokens are cut, from the newest end, into coarse
    blocks of vcc_coarse_block(block, u, rc) tokens (rc = min(budget - tail, u)), the
    oldest block possibly shorter; then, while the compressed region has fewer than rc
    segments, the segment of highest priority log(size * sum_h exp(q_h . mean k_h /
    sqrt(hd))) (eq. 53 of the VCC paper with the segment's size; ties: the newer one)
    is split into [lo, hi - size // 2) and [hi - size // 2, hi).
    """
    w = k.shape[-2]
    hd = k.shape[-1]
    tail = min(tail, w)
    u = w - tail
    segs = [(i, i + 1) for i in range(u, w)]
    if u == 0:
        return segs

    def priority(lo, hi):
        s = (q * k[:, lo:hi].mean(dim=-2)).sum(dim=-1) / math.sqrt(hd)
        return torch.logsumexp(s, dim=0).item() + math.log(hi - lo)

    rc = min(budget - tail, u)
    b = vcc_coarse_block(block, u, rc)
    blocks, hi = [], u
    while hi > 0:
        blocks.append((max(0, hi - b), hi))
        hi -= b
    done, heap = [], []

    def add(lo, hi):
        if hi - lo > 1:
            heapq.heappush(heap, (-priority(lo, hi), -hi, lo))
        else:
            done.append((lo, hi))

    for lo, hi in blocks:
        add(lo, hi)
    count = len(blocks)
    while count < rc and heap:
        _, neg_hi, lo = heapq.heappop(heap)
        mid = -neg_hi - (-neg_hi - lo) // 2
        add(lo, mid)
        add(mid, -neg_hi)
        count += 1
    return segs + done + [(lo, -neg_hi) for _, neg_hi, lo in heap]


def vcc_attention(q, k, v, budget, block=1, tail=0):
    """vcc for each query row of q (H, Lq, hd) against the window k, v (H, w, hd):
    softmax over the partition's segments of q . mean k / sqrt(hd) + log(size),
    weighting the segments' mean values. Returns (H, Lq, hd)."""
    hd = q.shape[-1]
    rows = []
    for i in range(q.shape[-2]):
        qi = q[:, i]
        segs = vcc_partition(qi, k, budget, block, tail)
        km = torch.stack([k[:, lo:hi].mean(dim=-2) for lo, hi in segs], dim=1)   # (H, S, hd)
        vm = torch.stack([v[:, lo:hi].mean(dim=-2) for lo, hi in segs], dim=1)
        size = torch.tensor([hi - lo for lo, hi in segs], dtype=q.dtype, device=q.device)
        scores = (km @ qi[..., None])[..., 0] / math.sqrt(hd) + size.log()
        rows.append((torch.softmax(scores, dim=-1)[:, None] @ vm)[:, 0])
    return torch.stack(rows, dim=1)


# --------------------------------------------------------------------------- windows

def mha_window(x, weights, variant, heads, landmarks=None, retroactive=False, pinv="exact",
               pinv_iterations=6, q_landmarks=None, k_landmarks=None, kernel_landmarks=None,
               queries=1, vcc_budget=64, vcc_block=1, vcc_exact_tail=0):
    """Non-continual multi-head attention over whole windows.

    x: (B, w, d), oldest token first. variant: one of VARIANTS; continual variants are
    computed with their windowed counterpart (continual -> regular, cony -> nystrom,
    cony-fixed -> nystrom-fixed).

    - "regular": softmax attention over the window.
    - "nystrom": landmarks = means of `landmarks` (m) contiguous segments of the window's
      q and k, the first w mod m segments one token longer; when w <= m the result is
      exact softmax attention.
    - "nystrom-fixed": landmarks `q_landmarks`, `k_landmarks` of shape (H, m, hd) (or
      (B, H, m, hd)), in the projected space before the 1/sqrt(hd) scaling.

    kernel_landmarks: optional pair (q~, k~) of per-window, per-head landmarks
    (B, H, m', hd) in the projected space; with "nystrom" (or "cony") they replace the
    segment means (no w <= m shortcut). This is how the `cony` schedule's held landmarks
    are expressed.

    Returns (B, d): the output row of the newest token, or with `retroactive` (B, w, d):
    one row per token of the window, oldest first. queries > 1 (single output, a
    multi-token step of docs/attention.md): (B, queries, d), the rows of the `queries`
    newest tokens, oldest first, each against the whole window.
    """
    if variant not in WINDOWED:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    kind = WINDOWED[variant]
    if x.dim() != 3:
        raise ValueError(f"x: expected (B, w, d), got {tuple(x.shape)}")
    qw, k, v = project(x, weights, heads)                # (B, H, w, hd)
    w = x.shape[1]
    if queries < 1 or queries > w:
        raise ValueError(f"queries = {queries}: expected 1 .. w = {w}")
    q = qw if retroactive else qw[..., -queries:, :]     # the queries whose rows are output

    if kind == "vcc":
        if retroactive:
            raise ValueError("vcc gives single outputs only (no retroactive form)")
        o = torch.stack([vcc_attention(q[b], k[b], v[b], vcc_budget, vcc_block, vcc_exact_tail)
                         for b in range(q.shape[0])])
    elif kind == "regular":
        o = softmax_attention(q, k, v)
    elif kind == "nystrom" and kernel_landmarks is not None:
        ql, kl = kernel_landmarks
        o = nystrom_attention(q, k, v, ql.to(x.dtype), kl.to(x.dtype), pinv, pinv_iterations)
    elif kind == "nystrom":
        if landmarks is None or landmarks < 1:
            raise ValueError("nystrom needs landmarks >= 1")
        if w <= landmarks:
            o = softmax_attention(q, k, v)
        else:
            p = segment_mean_matrix(segment_sizes(w, landmarks), x.dtype, x.device)
            ql = p @ qw                                  # (B, H, m, hd)
            kl = p @ k
            o = nystrom_attention(q, k, v, ql, kl, pinv, pinv_iterations)
    else:  # nystrom-fixed
        if q_landmarks is None or k_landmarks is None:
            raise ValueError("nystrom-fixed needs q_landmarks and k_landmarks")
        ql = q_landmarks.to(x.dtype)
        kl = k_landmarks.to(x.dtype)
        hd = x.shape[-1] // heads
        if ql.shape[-3] != heads or ql.shape[-1] != hd or kl.shape != ql.shape:
            raise ValueError(f"q_landmarks/k_landmarks: expected (H={heads}, m, hd={hd}), "
                             f"got {tuple(ql.shape)}/{tuple(kl.shape)}")
        o = nystrom_attention(q, k, v, ql, kl, pinv, pinv_iterations)

    out = merge_heads(o, weights)                        # (B, Lq, d)
    if retroactive or queries > 1:
        return out
    return out[:, -1, :]


# --------------------------------------------------------------------------- streams

def cony_segments(n, m):
    """Generator of (start, size) of the `cony` landmark segments from the stream start:
    segment j has n//m + 1 tokens when (j mod m) < n mod m, else n//m."""
    if m < 1 or m > n:
        raise ValueError(f"cony needs 1 <= landmarks <= window (got m = {m}, n = {n})")
    base, r = divmod(n, m)
    start, j = 0, 0
    while True:
        size = base + 1 if (j % m) < r else base
        yield start, size
        start += size
        j += 1


def cony_held_segments(t, n, m):
    """The segments (start, size) whose means are the landmarks at step t, oldest first.

    t >= n - 1: the m most recent segments complete at t (last token <= t).
    t <  n - 1: the schedule's segments of tokens 0..t, the newest possibly incomplete
    (then its size is the count of its tokens seen so far)."""
    if t < n - 1:
        held = []
        for start, size in cony_segments(n, m):
            if start > t:
                break
            held.append((start, min(size, t + 1 - start)))
        return held
    complete = []
    for start, size in cony_segments(n, m):
        if start + size - 1 > t:
            break
        complete.append((start, size))
    return complete[-m:]


def attention_steps(x, weights, variant, heads, window, landmarks=None, retroactive=False,
                    pinv="exact", pinv_iterations=6, q_landmarks=None, k_landmarks=None,
                    vcc_budget=64, vcc_block=1, vcc_exact_tail=0):
    """What a stepped layer outputs at every step of the stream x (T, d).

    Computed from the windowed definitions alone, recomputing everything each step:
    at step t the window holds tokens max(0, t-n+1) .. t (no padding in warm-up).
    Returns (T, d), or (T, n, d) with `retroactive` (n rows, oldest first, rows for
    positions before the stream start zero).
    """
    if variant not in WINDOWED:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    n = window
    T, d = x.shape
    rows = []
    if variant == "cony":
        qa, ka, _ = project(x, weights, heads)           # (H, T, hd), whole stream
    for t in range(T):
        lo = max(0, t - n + 1)
        win = x[lo:t + 1].unsqueeze(0)                   # (1, w, d)
        kw = dict(landmarks=landmarks, retroactive=retroactive, pinv=pinv,
                  pinv_iterations=pinv_iterations, q_landmarks=q_landmarks,
                  k_landmarks=k_landmarks, vcc_budget=vcc_budget, vcc_block=vcc_block,
                  vcc_exact_tail=vcc_exact_tail)
        if variant == "cony":
            held = cony_held_segments(t, n, landmarks)
            ql = torch.stack([qa[:, s:s + z].mean(dim=1) for s, z in held], dim=1)
            kl = torch.stack([ka[:, s:s + z].mean(dim=1) for s, z in held], dim=1)
            kw["kernel_landmarks"] = (ql.unsqueeze(0), kl.unsqueeze(0))
        out = mha_window(win, weights, variant, heads, **kw)[0]
        if retroactive:
            pad = torch.zeros(n - out.shape[0], d, dtype=out.dtype, device=out.device)
            out = torch.cat([pad, out], dim=0)
        rows.append(out)
    return torch.stack(rows, dim=0)
