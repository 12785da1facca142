#!/usr/bin/python3
"""Writes the attention golden files under tests/golden/attention/<case>/.

Every case directory holds
  weights.safetensors   in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
                        (+ q_landmarks, k_landmarks (H, m, hd) for the fixed variants);
                        __metadata__ "config" = JSON {variant, d, heads, window, landmarks,
                        retroactive, pinv, pinv_iterations [, vcc_budget, vcc_block,
                        vcc_exact_tail]}, "note" = a description
  input.npy             (T, d) float32 token stream
  expected.npy          (T, d) or (T, n, d) float32: the stepped layer's output at every
                        step (training/conytrain/ref attention_steps, float64, then cast)
  expected_window.npy   forward over the last n tokens with the windowed counterpart
                        of the variant: (d) or (n, d)
  expected_window_short.npy  the same over the last n - 2 tokens (zero-padded at the
                        front to n rows when retroactive)

The reference runs in float64 on the float32-rounded weights and inputs, so the C
float32 runtime sees exactly the same numbers. Each case is also run in float32 and
must agree with the float64 result to 5e-6 (per step, relative to max(1, max |expected|)),
and no output may exceed 1e3 in size: a
draw too ill-conditioned for a float32 comparison at 1e-4 is replaced by the next
seed (the attempt number is in the note).

verify() checks committed files against this script (training/tests/test_golden_files.py).

Usage: /usr/bin/python3 training/gen_attention_golden.py [OUTDIR]
"""

import json
import math
import os
import re
import shutil
import sys
import zlib

import torch

from conytrain import REPO
from conytrain.golden import check as golden_check
from conytrain.ref import attention as ref

torch.set_num_threads(1)

ROOT = REPO
DEFAULT_OUT = os.path.join(ROOT, "tests", "golden", "attention")

FIXED = ("nystrom-fixed", "cony-fixed")
USES_LANDMARKS = ("nystrom", "nystrom-fixed", "cony", "cony-fixed")


def case(variant, d, heads, n, m=0, retro=False, pinv="exact", iters=6, large=0.0, steps=None,
         vcc=None):
    """large: scale the input so that the largest |q.k|/sqrt(hd) is about this value.
    vcc: (budget r, block, exact tail L) of the vcc variant."""
    name = f"{variant}-{'retro' if retro else 'single'}-d{d}h{heads}n{n}"
    if variant in USES_LANDMARKS:
        name += f"m{m}"
    if vcc:
        name += "r{}b{}l{}".format(*vcc)
    if pinv == "iterative":
        name += f"-iter{iters}"
    if large:
        name += f"-score{int(large)}"
    return dict(name=name, variant=variant, d=d, heads=heads, window=n,
                landmarks=m if variant in USES_LANDMARKS else 0, retroactive=retro,
                pinv=pinv, pinv_iterations=iters, large=large, steps=steps or 3 * n,
                vcc=vcc)


CASES = [
    # regular / continual (the same function)
    case("regular", 8, 2, 6),
    case("regular", 8, 1, 7, retro=True),
    case("continual", 8, 2, 7),
    case("continual", 12, 3, 6),
    case("continual", 8, 1, 6, retro=True),
    case("continual", 16, 4, 10, retro=True),
    # Nyströmformer on the window (segment means)
    case("nystrom", 8, 2, 6, 3),
    case("nystrom", 8, 2, 10, 4),
    case("nystrom", 8, 1, 7, 2, retro=True),
    case("nystrom", 12, 2, 10, 3, retro=True),
    # fixed landmarks
    case("nystrom-fixed", 8, 2, 6, 3),
    case("nystrom-fixed", 8, 1, 7, 2, retro=True),
    case("cony-fixed", 8, 2, 6, 3),
    case("cony-fixed", 8, 1, 7, 4),
    case("cony-fixed", 8, 2, 10, 4, retro=True),
    case("cony-fixed", 12, 3, 7, 3, retro=True),
    # continual landmarks: n mod m = 0 and != 0, 1 to 4 heads
    case("cony", 8, 2, 6, 3),
    case("cony", 8, 1, 6, 2),
    case("cony", 8, 2, 10, 4),
    case("cony", 8, 1, 7, 3),
    case("cony", 16, 4, 7, 4),
    case("cony", 8, 1, 6, 3, retro=True),
    case("cony", 8, 2, 10, 4, retro=True),
    case("cony", 12, 2, 7, 3, retro=True),
    # iterative pseudo-inverse
    case("nystrom", 8, 2, 10, 4, pinv="iterative"),
    case("cony", 8, 2, 6, 3, pinv="iterative"),
    case("cony-fixed", 8, 2, 7, 3, retro=True, pinv="iterative", iters=4),
    # scores |q.k|/sqrt(hd) up to ~300: no exp may overflow
    case("regular", 8, 2, 6, large=300),
    case("continual", 8, 2, 6, large=300),
    case("continual", 8, 2, 7, retro=True, large=300),
    case("cony-fixed", 8, 2, 6, 3, large=300),
    case("cony-fixed", 8, 2, 7, 3, retro=True, large=300),
    # Segment-mean landmark kernels at scores of 300 are nearly always close to singular
    # (outputs of 1e5..1e12 that float32 cannot reproduce); 120 is past float exp's
    # overflow (88.7) and still gives comparable draws.
    case("cony", 8, 2, 6, 3, large=120),
    case("cony", 8, 1, 7, 3, retro=True, large=120),
    # vcc: budget below the window (compressing), at the window (exact), coarse blocks,
    # exact tails, several heads
    case("vcc", 8, 2, 12, vcc=(5, 1, 0)),
    case("vcc", 8, 2, 12, vcc=(12, 1, 0)),
    case("vcc", 8, 1, 10, vcc=(4, 1, 1)),
    case("vcc", 12, 3, 16, vcc=(6, 2, 2)),
    case("vcc", 16, 4, 24, vcc=(8, 4, 0)),
    case("vcc", 8, 2, 12, vcc=(5, 1, 1), large=300),
]

MAX_FLOAT32_ERROR = 5e-6
# A nearly singular landmark kernel can blow Nyström outputs up (1e12 seen with scores of
# 300); such a draw would hide errors of the other steps, so it is drawn again too.
MAX_OUTPUT = 1e3


# W_q and W_k are drawn QK_SCALE times larger than W_v so that attention is not nearly
# uniform (scores of a few units, as in trained models); near-uniform softmax kernels
# make the Nyström m x m kernel close to singular.
QK_SCALE = 2.0


def make_case_tensors(c, attempt=0):
    """float32 weights, fixed landmarks and input of a case, from a seed of its name."""
    gen = torch.Generator().manual_seed(zlib.crc32(c["name"].encode()) + 1000003 * attempt)
    d, heads, m = c["d"], c["heads"], c["landmarks"]
    hd = d // heads
    s = 1.0 / math.sqrt(d)
    wscale = torch.ones(3 * d, 1)
    wscale[:2 * d] = QK_SCALE
    w = {
        "in_proj_weight": torch.randn(3 * d, d, generator=gen) * s * wscale,
        "in_proj_bias": torch.randn(3 * d, generator=gen) * 0.1,
        "out_proj.weight": torch.randn(d, d, generator=gen) * s,
        "out_proj.bias": torch.randn(d, generator=gen) * 0.1,
    }
    if c["variant"] in FIXED:
        w["q_landmarks"] = torch.randn(heads, m, hd, generator=gen)
        w["k_landmarks"] = torch.randn(heads, m, hd, generator=gen)
    x = torch.randn(c["steps"], d, generator=gen)
    if c["large"]:
        x = x * input_scale_for(x, w, c)
    w = {k: v.float() for k, v in w.items()}
    return w, x.float()


def max_abs_score(x, w, c):
    """Largest |a.b|/sqrt(hd) between any two tokens' q and k (and fixed landmarks)."""
    x = x.double()
    w64 = {k: v.double() for k, v in w.items()}
    q, k, _ = ref.project(x, w64, c["heads"])
    hd = c["d"] // c["heads"]
    qs = [q, w64["q_landmarks"]] if "q_landmarks" in w64 else [q]
    ks = [k, w64["k_landmarks"]] if "k_landmarks" in w64 else [k]
    return max((a @ b.transpose(-1, -2)).abs().max().item() / math.sqrt(hd)
               for a in qs for b in ks)


def input_scale_for(x, w, c):
    """Scale of the input that brings the largest score to about c["large"]."""
    scale, target = 1.0, c["large"]
    for _ in range(30):
        got = max_abs_score(x * scale, w, c)
        if abs(got - target) < 0.02 * target:
            break
        scale *= math.sqrt(target / got) if got > 0 else 2.0
    return scale


def run_reference(x, w, c, dtype):
    wt = {k: v.to(dtype) for k, v in w.items()}
    kw = dict(landmarks=c["landmarks"] or None, retroactive=c["retroactive"], pinv=c["pinv"],
              pinv_iterations=c["pinv_iterations"], q_landmarks=wt.get("q_landmarks"),
              k_landmarks=wt.get("k_landmarks"))
    if c["vcc"]:
        kw.update(zip(("vcc_budget", "vcc_block", "vcc_exact_tail"), c["vcc"]))
    steps = ref.attention_steps(x.to(dtype), wt, c["variant"], c["heads"], c["window"], **kw)
    n = c["window"]
    windows = []
    for size in (n, n - 2):
        out = ref.mha_window(x[-size:].to(dtype)[None], wt, c["variant"], c["heads"], **kw)[0]
        if c["retroactive"]:
            out = torch.cat([torch.zeros(n - size, c["d"], dtype=dtype), out], dim=0)
        windows.append(out)
    return steps, windows


def rel(a, b):
    """Worst step of max |a - b| / max(1, max |b|), steps along the first axis."""
    a = a.double().reshape(a.shape[0], -1) if a.dim() > 1 else a.double()[None]
    b = b.double().reshape(b.shape[0], -1) if b.dim() > 1 else b.double()[None]
    scale = b.abs().amax(dim=1).clamp(min=1.0)
    return ((a - b).abs().amax(dim=1) / scale).max().item()


def pick_draw(c):
    """(attempt, w, x, err32) of the case's first draw that float32 can be compared on."""
    # Draws whose float32 run strays from float64 (an almost singular Nyström kernel
    # somewhere in the stream) cannot be compared at 1e-4, nor can outputs that such a
    # kernel blew up: draw again.
    for attempt in range(100 if c["large"] else 20):
        w, x = make_case_tensors(c, attempt)
        steps64, win64 = run_reference(x, w, c, torch.float64)
        if not torch.isfinite(steps64).all():
            raise RuntimeError(f"{c['name']}: non-finite reference output")
        steps32, win32 = run_reference(x, w, c, torch.float32)
        err32 = max(rel(steps32, steps64), *(rel(a, b) for a, b in zip(win32, win64)))
        size = max(steps64.abs().max().item(), *(o.abs().max().item() for o in win64))
        if err32 <= MAX_FLOAT32_ERROR and size <= MAX_OUTPUT:
            return attempt, w, x, err32
    raise RuntimeError(f"{c['name']}: no draw with a float32 error below {MAX_FLOAT32_ERROR} "
                       f"and outputs below {MAX_OUTPUT}")


def reference_files(c, w, x):
    """The expected*.npy files of a case (float64 reference, stored float32) and the
    largest |output|."""
    steps64, win64 = run_reference(x, w, c, torch.float64)
    size = max(steps64.abs().max().item(), *(o.abs().max().item() for o in win64))
    files = {"expected.npy": steps64, "expected_window.npy": win64[0],
             "expected_window_short.npy": win64[1]}
    return {k: v.numpy().astype("<f4") for k, v in files.items()}, size


def case_note(c, attempt, w, x, size, err32):
    return (f"{c['steps']} steps; draw {attempt}; "
            f"max |q.k|/sqrt(hd) = {max_abs_score(x, w, c):.1f}; max |output| = {size:.3g}; "
            f"float32 reference differs by {err32:.1e} (relative, worst step)")


def input_files(c, w, x, note):
    config = {k: c[k] for k in ("variant", "d", "heads", "window", "landmarks", "retroactive",
                                "pinv", "pinv_iterations")}
    if c["vcc"]:
        config.update(zip(("vcc_budget", "vcc_block", "vcc_exact_tail"), c["vcc"]))
    return {"weights.safetensors": ({k: v.numpy() for k, v in w.items()},
                                    {"config": json.dumps(config), "note": note}),
            "input.npy": x.numpy().astype("<f4")}


def write_case(outdir, c):
    attempt, w, x, err32 = pick_draw(c)
    outputs, size = reference_files(c, w, x)
    note = case_note(c, attempt, w, x, size, err32)
    golden_check.write(os.path.join(outdir, c["name"]), {**input_files(c, w, x, note), **outputs})
    return note


NOTE_DRAW = re.compile(r"draw (\d+);.* differs by (\S+) \(")


def verify(golden=DEFAULT_OUT):
    """Messages for every way the golden files under `golden` are not what this script
    writes ([] when they are): the case directories are CASES', weights, config and
    input are the draw the note records, the expected files are the float64 reference
    on the committed weights and input. Which draw float32 accepts depends on the CPU,
    so the float32 run is not redone: the note's draw and error are taken as recorded."""
    problems, files = [], {}
    for c in CASES:
        tensors, meta = golden_check.committed(golden, f"{c['name']}/weights.safetensors", ({}, {}))
        found = NOTE_DRAW.search(meta.get("note", ""))
        if not found:
            problems.append(f"{c['name']}: the note records no draw")
            continue
        attempt, err32 = int(found[1]), float(found[2])
        if err32 > MAX_FLOAT32_ERROR:
            problems.append(f"{c['name']}: recorded float32 error {err32} > {MAX_FLOAT32_ERROR}")
        w, x = make_case_tensors(c, attempt)
        # the reference runs on what is committed (where it has the right tensors)
        cw = {k: torch.from_numpy(v) for k, v in tensors.items()} if set(tensors) == set(w) else w
        cx = torch.from_numpy(golden_check.committed(golden, f"{c['name']}/input.npy", x.numpy()))
        outputs, size = reference_files(c, cw, cx)
        note = case_note(c, attempt, w, x, size, err32)
        files.update({f"{c['name']}/{k}": v
                      for k, v in {**input_files(c, w, x, note), **outputs}.items()})
    return problems + golden_check.compare(golden, files)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names), "duplicate case names"
    if os.path.isdir(outdir):
        for entry in os.listdir(outdir):
            if os.path.isfile(os.path.join(outdir, entry, "weights.safetensors")):
                shutil.rmtree(os.path.join(outdir, entry))
    os.makedirs(outdir, exist_ok=True)
    for c in CASES:
        print(f"{c['name']}: {write_case(outdir, c)}")


if __name__ == "__main__":
    main()
