#!/usr/bin/python3
"""Golden files for libcony's continual CNN (tests/libcony/test_cnn_continual.c).

Writes into tests/golden/continual/ (or the directory given) one small random MobileNet-v1
whose window is a multiple of its time stride (input 24x16x1, time stride 8, K = 3 rows of
the final map per window; every layer kind: conv3x3s2 dw3x3s1 conv1x1 dw3x3s2 conv1x1
dw3x3s1 conv1x1 dw3x3s2 conv1x1 gap fc sigmoid; 24-d embedding, 10 scores) and a stream:

  net.safetensors            F32 weights, ReLU6
  stream.npy                 (150, 16) float32 frames (150: not a multiple of anything)
  hop{8,16}_embedding.npy    (N, 24) the continual embeddings of the stream at that hop
  hop{8,16}_scores.npy       (N, 10) the continual scores
                             (float64 reference conytrain/ref/continual_cnn.py, as float32)
  q8.safetensors             the same net with int8 weights (per output channel), a
                             softmax head and the `quantization` metadata of an integer
                             .tflite (activations calibrated on the stream)
  q8_hop{8,16}_{embedding,scores}.npy  the integer reference (continual_cnn.stream_int8,
                             TFLite's arithmetic), dequantised: libcony equals them bit for bit

Usage: /usr/bin/python3 training/gen_continual_cnn_golden.py [OUTDIR]
"""

import os

import numpy as np

from conytrain import REPO
from conytrain.golden import check as golden_check
from conytrain.golden.mobilenet import activation_pair, quantised, random_tensors, with_quantization
from conytrain.ref import continual_cnn, mobilenet, qmobilenet

DEFAULT_OUT = os.path.join(REPO, "tests", "golden", "continual")
LAYERS = (("conv3x3s2", 8), ("dw3x3s1", None), ("conv1x1", 12), ("dw3x3s2", None),
          ("conv1x1", 16), ("dw3x3s1", None), ("conv1x1", 16), ("dw3x3s2", None),
          ("conv1x1", 24), ("gap", None), ("fc", 10), ("sigmoid", None))
Q_LAYERS = LAYERS[:-1] + (("softmax", None),)
INPUT = (24, 16, 1)
FRAMES = 150
HOPS = (8, 16)


def golden_files(say=lambda text: None):
    rng = np.random.default_rng(2061)
    tensors = random_tensors(rng, LAYERS, INPUT)
    meta = {"network": "mobilenet_v1", "input_height": str(INPUT[0]),
            "input_width": str(INPUT[1]), "input_channels": str(INPUT[2]),
            "layers": " ".join(word for word, _ in LAYERS)}
    net = mobilenet.from_tensors(tensors, meta)
    x = (rng.standard_normal((FRAMES, INPUT[1])) * 3.0).astype(np.float32)
    files = {"net.safetensors": (tensors, meta), "stream.npy": x}
    for hop in HOPS:
        emb, scores = continual_cnn.stream(net, x, hop)
        files[f"hop{hop}_embedding.npy"] = emb.astype(np.float32)
        files[f"hop{hop}_scores.npy"] = scores.astype(np.float32)
        say(f"hop {hop}: {len(emb)} tokens, scores {scores.min():.3f}..{scores.max():.3f}, "
            f"lookahead {continual_cnn.lookahead(net)} frames")
    t, qmeta = integer_net(tensors, meta, x)
    files["q8.safetensors"] = (t, qmeta)
    qnet = qmobilenet.from_tensors(t, qmeta)
    for hop in HOPS:
        emb, scores = continual_cnn.stream_int8(qnet, x, hop)
        files[f"q8_hop{hop}_embedding.npy"] = emb
        files[f"q8_hop{hop}_scores.npy"] = scores
        say(f"q8 hop {hop}: {len(emb)} tokens, top-1 {np.argmax(scores, 1).tolist()}")
    return files


def integer_net(tensors, meta, x):
    """The net with int8 weights and a softmax head, its activations quantised over
    their range on the stream x (the `quantization` metadata of an integer .tflite)."""
    meta = dict(meta, layers=" ".join(word for word, _ in Q_LAYERS))
    t = quantised(tensors)
    net = mobilenet.from_tensors(t, meta)
    rows = continual_cnn.final_rows(net, x, every=True)
    emb, _ = continual_cnn.stream(net, x, HOPS[0])
    logits = emb @ net["layers"][len(rows) + 1][1].T + net["layers"][len(rows) + 1][2]
    ranges = [(float(v.min()), float(v.max())) for v in rows + [emb, logits]]
    pairs = [activation_pair(lo, hi, False) for lo, hi in ranges] + [(1.0 / 256.0, -128)]
    s_in = float(np.float32(np.abs(x).max() / 127.0))
    return with_quantization(t, meta, s_in, pairs)


def verify(golden=DEFAULT_OUT):
    """Messages for every way the files under `golden` differ from what main() writes."""
    return golden_check.compare(golden, golden_files())


def main():
    golden_check.write_main(DEFAULT_OUT, golden_files)


if __name__ == "__main__":
    main()
