#!/usr/bin/python3
"""Export -> load round trip (run by meson as the `model-roundtrip` test).

    /usr/bin/python3 training/test_model_roundtrip.py PATH/TO/cony

With torch: trains tiny models on synthetic sequences with train.py (1 block: cony then
the fixed-landmark k-means + fine-tune procedure; 2 blocks: cony with a cyclic
positional table; 1 block with 2-token steps, tokens_per_step = 2), exports them with export.py, runs `cony info` and `cony classify`
on a fresh token stream and checks the C logits against the PyTorch model's per-step
logits (float64) to 1e-4, also with --attention overrides, and an F16 export against the
half-rounded PyTorch model;.
Without torch (the setup script installs it, so this is a degraded environment) it says
so loudly and checks `cony classify` against the committed golden files instead. It
never skips.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOL = 1e-4


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {cmd[0]} exited with {r.returncode}")
    return r.stdout


def classify(cony, model, tokens, tmp, attention=None):
    inp = os.path.join(tmp, "in.npy")
    out = os.path.join(tmp, "out.npy")
    np.save(inp, tokens.astype(np.float32))
    cmd = [cony, "classify", "--model", model, inp, "-o", out]
    if attention:
        cmd[2:2] = ["--attention", attention]
    run(cmd)
    got = np.load(out)
    assert got.dtype == np.float32, got.dtype
    return got


def compare(name, got, want):
    if got.shape != want.shape:
        raise SystemExit(f"FAIL {name}: shape {got.shape}, expected {want.shape}")
    err = np.abs(got.astype(np.float64) - want).max(axis=1)
    print(f"{name}: {len(err)} steps, max |C - torch| = {err.max():.3g} (step {err.argmax()})")
    if not err.max() <= TOL:
        raise SystemExit(f"FAIL {name}: step {err.argmax()} differs by {err.max():.3g} > {TOL}")


def synthetic(rng, N, L, d_in, classes):
    """Class c: tokens drift along direction c, with a class-dependent oscillation."""
    y = rng.integers(0, classes, N)
    dirs = rng.normal(size=(classes, d_in))
    t = np.arange(L)[None, :, None]
    x = rng.normal(scale=0.8, size=(N, L, d_in)) + dirs[y][:, None, :] * np.sin(0.7 * t + y[:, None, None])
    return x.astype(np.float32), y.astype(np.int64)


def parameters_line(model):
    """`cony info`'s parameter count line for model (every exported tensor)."""
    return f"parameters:   {sum(a.size for a in model.export_tensors().values())}\n"


def half_rounded(model):
    """model with every weight and buffer rounded to float16, as an F16 export stores it."""
    import torch
    with torch.no_grad():
        for t in list(model.parameters()) + [b for b in model.buffers() if b is not None]:
            t.copy_(t.half().float())
    return model


def with_torch(cony, tmp):
    import torch
    from conytrain.ref.model import load_checkpoint

    torch.set_num_threads(1)
    rng = np.random.default_rng(7)
    x, y = synthetic(rng, 48, 20, 6, 3)
    np.save(os.path.join(tmp, "x.npy"), x)
    np.save(os.path.join(tmp, "y.npy"), y)
    stream = synthetic(rng, 1, 3 * 7 + 4, 6, 3)[0][0]

    common = ["--tokens", os.path.join(tmp, "x.npy"), "--labels", os.path.join(tmp, "y.npy"),
              "--d", "8", "--heads", "2", "--ff", "16", "--epochs", "2", "--batch", "16",
              "--label-names", "up,down,flat"]
    models = [
        ("b1", common + ["--blocks", "1", "--window", "6", "--landmarks", "2", "--attention",
                         "cony", "--fixed-landmarks", "--finetune-epochs", "1",
                         "--kmeans-windows", "32"],
         [None, "nystrom-fixed", "cony", "continual"]),
        ("b2", common + ["--blocks", "2", "--window", "7", "--landmarks", "3", "--attention",
                         "cony", "--positional", "cyclic"],
         [None, "regular", "nystrom"]),
        ("k2", common + ["--blocks", "1", "--window", "8", "--landmarks", "2", "--attention",
                         "cony", "--tokens-per-step", "2", "--fixed-landmarks",
                         "--finetune-epochs", "1", "--kmeans-windows", "32"],
         [None, "nystrom-fixed", "cony", "continual"]),
    ]
    for name, args, variants in models:
        ckpt = os.path.join(tmp, name + ".pt")
        path = os.path.join(tmp, name + ".safetensors")
        run([sys.executable, os.path.join(HERE, "train.py"), "-o", ckpt] + args)
        run([sys.executable, os.path.join(HERE, "export.py"), ckpt, "-o", path])
        info = run([cony, "info", path])
        for key in ("parameters:", "state:", "FLOPs/step:", "up, down, flat"):
            if key not in info:
                raise SystemExit(f"FAIL: `cony info` output lacks {key!r}")
        model = load_checkpoint(ckpt).double().eval()
        if parameters_line(model) not in info:
            raise SystemExit(f"FAIL: `cony info` does not report `{parameters_line(model)}`")
        k = model.config.get("tokens_per_step", 1)
        if k > 1 and "tokens per step" not in info:
            raise SystemExit("FAIL: `cony info` does not report the tokens per step")
        steps = stream[: len(stream) // k * k]
        for v in variants:
            want = model.stream_logits(torch.from_numpy(steps).double(), override=v).numpy()
            got = classify(cony, path, steps, tmp, v)
            compare(f"{name} ({','.join(model.config['attention'])}"
                    f"{' run as ' + v if v else ''})", got, want)
    # F16 storage: the same model exported as half; C must compute the half-rounded model
    f16 = os.path.join(tmp, "b1_f16.safetensors")
    run([sys.executable, os.path.join(HERE, "export.py"), os.path.join(tmp, "b1.pt"), "-o", f16,
         "--dtype", "f16"])
    if os.path.getsize(f16) >= os.path.getsize(os.path.join(tmp, "b1.safetensors")):
        raise SystemExit("FAIL: the F16 export is not smaller than the F32 one")
    model = half_rounded(load_checkpoint(os.path.join(tmp, "b1.pt"))).double().eval()
    want = model.stream_logits(torch.from_numpy(stream).double()).numpy()
    compare("b1 stored F16", classify(cony, f16, stream, tmp), want)

    # --output-scores sigmoid: recorded in the config (cony info says so), weights unchanged
    sig = os.path.join(tmp, "b1_sigmoid.safetensors")
    run([sys.executable, os.path.join(HERE, "export.py"), os.path.join(tmp, "b1.pt"), "-o", sig,
         "--output-scores", "sigmoid"])
    if "output:       sigmoid" not in run([cony, "info", sig]):
        raise SystemExit("FAIL: `cony info` does not report the sigmoid output")
    if "output:       softmax" not in run([cony, "info", os.path.join(tmp, "b1.safetensors")]):
        raise SystemExit("FAIL: `cony info` does not report the default softmax output")
    b1 = load_checkpoint(os.path.join(tmp, "b1.pt")).double().eval()
    compare("b1 exported with sigmoid output", classify(cony, sig, stream, tmp),
            b1.stream_logits(torch.from_numpy(stream).double()).numpy())

    # an override that needs landmarks the file lacks is refused with a clear message
    r = subprocess.run([cony, "classify", "--model", os.path.join(tmp, "b2.safetensors"),
                        "--attention", "cony-fixed", os.path.join(tmp, "in.npy"), "-o",
                        os.path.join(tmp, "o.npy")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode == 0 or "landmarks" not in r.stdout:
        raise SystemExit(f"FAIL: cony-fixed on a model without landmarks: {r.stdout!r}")
    print("refused as expected: " + r.stdout.strip())
    # a token count that is not a whole number of steps is refused
    np.save(os.path.join(tmp, "odd.npy"), stream[:5])
    r = subprocess.run([cony, "classify", "--model", os.path.join(tmp, "k2.safetensors"),
                        os.path.join(tmp, "odd.npy"), "-o", os.path.join(tmp, "o.npy")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode == 0 or "tokens_per_step" not in r.stdout:
        raise SystemExit(f"FAIL: 5 tokens for a 2-token-step model: {r.stdout!r}")
    print("refused as expected: " + r.stdout.strip())


def without_torch(cony, tmp):
    gdir = os.path.join(ROOT, "tests", "golden", "model")
    print("WARNING: torch is not importable by this Python; the setup script installs "
          "python3-torch. Checking the committed golden models instead of a fresh export.")
    for case in ("b1_cony", "b2_conyfixed", "b2_cony_r"):
        tokens = np.load(os.path.join(gdir, case + ".tokens.npy"))
        want = np.load(os.path.join(gdir, case + ".logits.npy"))
        got = classify(cony, os.path.join(gdir, case + ".safetensors"), tokens, tmp)
        compare(case + " (committed)", got, want)


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: test_model_roundtrip.py PATH/TO/cony")
    cony = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="cony-roundtrip-") as tmp:
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
        if have_torch:
            with_torch(cony, tmp)
        else:
            without_torch(cony, tmp)
    print("PASS")


if __name__ == "__main__":
    main()
