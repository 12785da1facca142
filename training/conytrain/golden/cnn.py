#!/usr/bin/python3
"""Golden files for libcony's CNN engine (tests/libcony/test_cnn.c).

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

import numpy as np
import torch

from conytrain import REPO
from conytrain.cnn.vggish import VGGishLike, postprocess_tf, postprocess_torch
from conytrain.golden import check as golden_check

SMALL_CONV = (8, "M", 16, "M", 16, 16, "M", 32, 32, "M")
SMALL_FC = (32, 32, 128)
DEFAULT_OUT = os.path.join(REPO, "tests", "golden", "cnn")


def state_arrays(model):
    return {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}


def golden_files(committed_dir=None, say=lambda text: None):
    """{relative path: contents} of the golden directory (golden_check's form). With
    `committed_dir`, the postprocessed files are computed from that directory's committed
    embeddings and PCA tensors (where present): they are quantised to 256 levels, so an
    input that moved by one float32 ulp on another CPU must not move them."""
    torch.set_num_threads(1)
    torch.manual_seed(4)
    rng = np.random.default_rng(44)
    files = {}

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
    emb = float64_outputs(SMALL_CONV, SMALL_FC, tensors, x, final_relu=False)
    assert emb.shape == (4, 128)
    assert (emb < 0).any() and (emb > 0).any(), "pre-activation output should have both signs"

    # PCA: a random rotation scaled so that the projections spread over about
    # [-3, 3] (some clipped, most not), means near the embeddings' mean.
    q, _ = np.linalg.qr(rng.standard_normal((128, 128)))
    means = emb.mean(axis=0) + rng.standard_normal(128) * emb.std() * 0.1
    spread = ((emb - means) @ q.T).std()
    tensors["pca_eigen_vectors"] = (q * (1.2 / spread)).astype(np.float32)
    tensors["pca_means"] = means.astype(np.float32)
    files["small.safetensors"] = (tensors, {
        "final_relu": "false", "architecture": "vggish",
        "note": "reduced random VGGish for tests (gen_cnn_golden.py)"})
    files["small_input.npy"] = x
    files["small_expected.npy"] = emb.astype(np.float32)

    emb32 = files["small_expected.npy"]
    eigen, means = tensors["pca_eigen_vectors"], tensors["pca_means"]
    if committed_dir is not None:
        emb32 = golden_check.committed(committed_dir, "small_expected.npy", emb32)
        stored = golden_check.committed(committed_dir, "small.safetensors", (tensors, None))[0]
        eigen = stored.get("pca_eigen_vectors", eigen)
        means = stored.get("pca_means", means)
    pp_tf = postprocess_tf(emb32, eigen, means)
    pp_torch = postprocess_torch(emb32, eigen, means)
    differ = int((pp_tf != pp_torch).sum())
    assert 0 < differ and (pp_tf == 0).any() and (pp_tf == 255).any(), differ
    files["small_pp_tf.npy"] = pp_tf
    files["small_pp_torch.npy"] = pp_torch

    # The same network with every weight stored as F16 (biases F32): libcony keeps
    # the FC weights in F16 and computes with them expanded; torch in float64 on
    # the F16-rounded weights is the reference.
    f16 = {k: v.astype(np.float16) if k.endswith(".weight") else v
           for k, v in tensors.items() if not k.startswith("pca")}
    emb16 = float64_outputs(SMALL_CONV, SMALL_FC, f16, x, final_relu=False)
    files["small_f16.safetensors"] = (f16, {
        "final_relu": "false", "architecture": "vggish",
        "note": "small.safetensors with F16 weights (gen_cnn_golden.py)"})
    files["small_f16_expected.npy"] = emb16.astype(np.float32)
    say(f"small_f16: F16 weights change the embeddings by "
        f"{np.abs(emb16 - emb).max() / np.abs(emb).max():.2e} relative")
    say(f"small: {sum(v.size for k, v in tensors.items() if not k.startswith('pca'))} params, "
        f"emb std {emb.std():.3f}, {differ} of {pp_tf.size} postprocessed values differ TF/torch")

    # A different layout: 2-channel 20x12 input, two trailing pools, final ReLU.
    torch.manual_seed(5)
    odd_conv, odd_fc = (4, "M", 6, 6, "M", "M"), (16, 10)
    odd_shape = dict(input_hw=(20, 12), in_channels=2, final_relu=True)
    odd = VGGishLike(odd_conv, odd_fc, **odd_shape)
    with torch.no_grad():
        for name, p in odd.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.2, 0.2)
    otensors = state_arrays(odd)
    assert sorted({k.rsplit(".", 1)[0] for k in otensors}) == [
        "embeddings.0", "embeddings.2", "features.0", "features.3", "features.5"]
    xo = rng.standard_normal((3, 20, 12, 2)).astype(np.float32)      # HWC
    eo = float64_outputs(odd_conv, odd_fc, otensors, xo.transpose(0, 3, 1, 2), **odd_shape)
    assert (eo == 0).any() and (eo > 0).any()
    files["odd.safetensors"] = (otensors, {"input_height": "20", "input_width": "12",
                                           "input_channels": "2", "final_relu": "true"})
    files["odd_input.npy"] = xo
    files["odd_expected.npy"] = eo.astype(np.float32)
    say(f"odd: {sum(v.size for v in otensors.values())} params, output {eo.shape}")
    return files


def float64_outputs(conv, fc, tensors, x, **shape):
    """The network's outputs computed by torch in float64 on the weights as stored (what
    libcony uses); x: (N, C, H, W) or (N, H, W)."""
    m64 = VGGishLike(conv, fc, **shape).double()
    m64.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float64))
                         for k, v in tensors.items() if not k.startswith("pca")})
    with torch.no_grad():
        return m64(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))).numpy()


def verify(golden=DEFAULT_OUT):
    """Messages for every way the golden files under `golden` are not what main() writes
    ([] when they are), checked numerically (golden_check)."""
    return golden_check.compare(golden, golden_files(golden))


def main():
    golden_check.write_main(DEFAULT_OUT, golden_files)


if __name__ == "__main__":
    main()
