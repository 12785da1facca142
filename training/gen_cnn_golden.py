#!/usr/bin/python3
"""Golden files for libcony's CNN engine (tests/test_cnn.c).

Writes into tests/golden/cnn/ (or the directory given):

  small.safetensors      a REDUCED VGGish: torchvggish's layer layout and indices
                         (convs at features.0 3 6 8 11 13, pools at 2 5 10 15,
                         embeddings.0 2 4) with widths 8/16/16/16/32/32 and FC
                         32/32/128, random weights, metadata final_relu=false,
                         plus pca_eigen_vectors (128, 128) and pca_means (128)
  small_input.npy        (4, 96, 64) float32 patches
  small_expected.npy     (4, 128) embeddings computed by torch in float64
  small_pp_tf.npy        postprocess of small_expected (as float32), TF form
  small_pp_torch.npy     the same, torchvggish form
  small_f16.safetensors  the same network with every weight stored as F16 (biases
                         F32, no PCA)
  small_f16_expected.npy (4, 128) torch float64 on the F16-rounded weights
  odd.safetensors        another layout: input 20x12x2 from the metadata, convs
                         4 M 6 6 M M (two trailing pools), FC 16/10, final_relu=true
  odd_input.npy          (3, 20, 12, 2) float32, HWC like libcony takes it
  odd_expected.npy       (3, 10) torch float64

Usage: /usr/bin/python3 training/gen_cnn_golden.py [OUTDIR]
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import safetensors_io  # noqa: E402
from vggish_model import VGGishLike, postprocess_tf, postprocess_torch  # noqa: E402

SMALL_CONV = (8, "M", 16, "M", 16, 16, "M", 32, 32, "M")
SMALL_FC = (32, 32, 128)


def state_arrays(model):
    return {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "golden", "cnn")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(4)
    rng = np.random.default_rng(44)

    # Reduced VGGish, pre-activation output (final_relu false).
    model = VGGishLike(SMALL_CONV, SMALL_FC, final_relu=False)
    # Biases are zero-ish by default init; make them clearly non-zero.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.1, 0.1)
    tensors = state_arrays(model)
    assert sorted(k for k in tensors if k.startswith("features")) == sorted(
        f"features.{i}.{s}" for i in (0, 3, 6, 8, 11, 13) for s in ("weight", "bias"))
    assert sorted(k for k in tensors if k.startswith("embeddings")) == sorted(
        f"embeddings.{i}.{s}" for i in (0, 2, 4) for s in ("weight", "bias"))

    x = (rng.standard_normal((4, 96, 64)) * 2.0 - 1.0).astype(np.float32)
    # The weights as stored (float32) are what libcony uses: run torch in float64 on them.
    m64 = VGGishLike(SMALL_CONV, SMALL_FC, final_relu=False).double()
    m64.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in tensors.items()})
    with torch.no_grad():
        emb = m64(torch.from_numpy(x.astype(np.float64))).numpy()
    assert emb.shape == (4, 128)
    assert (emb < 0).any() and (emb > 0).any(), "pre-activation output should have both signs"

    # PCA: a random rotation scaled so that the projections spread over about
    # [-3, 3] (some clipped, most not), means near the embeddings' mean.
    q, _ = np.linalg.qr(rng.standard_normal((128, 128)))
    means = emb.mean(axis=0) + rng.standard_normal(128) * emb.std() * 0.1
    spread = ((emb - means) @ q.T).std()
    eigen = (q * (1.2 / spread)).astype(np.float32)
    means = means.astype(np.float32)
    tensors["pca_eigen_vectors"] = eigen
    tensors["pca_means"] = means
    emb32 = emb.astype(np.float32)
    pp_tf = postprocess_tf(emb32, eigen, means)
    pp_torch = postprocess_torch(emb32, eigen, means)
    differ = int((pp_tf != pp_torch).sum())
    assert 0 < differ and (pp_tf == 0).any() and (pp_tf == 255).any(), differ

    safetensors_io.save(os.path.join(out, "small.safetensors"), tensors,
                        {"final_relu": "false", "architecture": "vggish",
                         "note": "reduced random VGGish for tests (gen_cnn_golden.py)"})
    np.save(os.path.join(out, "small_input.npy"), x)
    np.save(os.path.join(out, "small_expected.npy"), emb32)
    np.save(os.path.join(out, "small_pp_tf.npy"), pp_tf)
    np.save(os.path.join(out, "small_pp_torch.npy"), pp_torch)
    # The same network with every weight stored as F16 (biases F32): libcony keeps
    # the FC weights in F16 and computes with them expanded; torch in float64 on
    # the F16-rounded weights is the reference.
    f16 = {k: v for k, v in tensors.items() if not k.startswith("pca")}
    f16_dtypes = {k: "F16" for k in f16 if k.endswith(".weight")}
    r64 = VGGishLike(SMALL_CONV, SMALL_FC, final_relu=False).double()
    r64.load_state_dict({k: torch.from_numpy(v.astype(np.float16 if k in f16_dtypes else np.float32)
                                             .astype(np.float64)) for k, v in f16.items()})
    with torch.no_grad():
        emb16 = r64(torch.from_numpy(x.astype(np.float64))).numpy()
    safetensors_io.save(os.path.join(out, "small_f16.safetensors"), f16,
                        {"final_relu": "false", "architecture": "vggish",
                         "note": "small.safetensors with F16 weights (gen_cnn_golden.py)"},
                        dtypes=f16_dtypes)
    np.save(os.path.join(out, "small_f16_expected.npy"), emb16.astype(np.float32))
    print(f"small_f16: F16 weights change the embeddings by "
          f"{np.abs(emb16 - emb).max() / np.abs(emb).max():.2e} relative")
    print(f"small: {sum(v.size for k, v in tensors.items() if not k.startswith('pca'))} params, "
          f"emb std {emb.std():.3f}, {differ} of {pp_tf.size} postprocessed values differ TF/torch")

    # A different layout: 2-channel 20x12 input, two trailing pools, final ReLU.
    torch.manual_seed(5)
    odd_conv, odd_fc = (4, "M", 6, 6, "M", "M"), (16, 10)
    odd = VGGishLike(odd_conv, odd_fc, input_hw=(20, 12), in_channels=2, final_relu=True)
    with torch.no_grad():
        for name, p in odd.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.2, 0.2)
    otensors = state_arrays(odd)
    assert sorted({k.rsplit(".", 1)[0] for k in otensors}) == [
        "embeddings.0", "embeddings.2", "features.0", "features.3", "features.5"]
    o64 = VGGishLike(odd_conv, odd_fc, input_hw=(20, 12), in_channels=2, final_relu=True).double()
    o64.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in otensors.items()})
    xo = rng.standard_normal((3, 20, 12, 2)).astype(np.float32)      # HWC
    with torch.no_grad():
        eo = o64(torch.from_numpy(xo.astype(np.float64)).permute(0, 3, 1, 2)).numpy()
    assert (eo == 0).any() and (eo > 0).any()
    safetensors_io.save(os.path.join(out, "odd.safetensors"), otensors,
                        {"input_height": "20", "input_width": "12", "input_channels": "2",
                         "final_relu": "true"})
    np.save(os.path.join(out, "odd_input.npy"), xo)
    np.save(os.path.join(out, "odd_expected.npy"), eo.astype(np.float32))
    print(f"odd: {sum(v.size for v in otensors.values())} params, output {eo.shape}")


if __name__ == "__main__":
    main()
