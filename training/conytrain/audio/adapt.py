"""YAMNet's last layers adapted to the classifier's classes (train_yamnet_audio.py
--adapt-cnn, models/audio/EXPERIMENTS.md rules 25 and 28).

The token is the mean over YAMNet's 3 x 2 last positions of layer 26 (pointwise 1024 ->
1024). Before the encoder is trained, the layers from --adapt-from (25: the depthwise layer
25 and layer 26; 23: also the strided depthwise layer 23 and the pointwise 512 -> 1024 layer
24), initialised from the file, and a linear head on the pooled embedding are trained on
single patches of the train clips, each labelled with its clip's class, from the output of
the layer before as libcony computes it (`cony embed` with the file cut there, cached once
per clip: CACHE/acts-l<first>/<set>/<clip>.npy, (patches, H * W * C) float32, HWC). The
layers are then quantised to int8 per output channel, as
YAMNet's own are, and written into a copy of the file (same layers, same cost in libcony)
without YAMNet's 521-class head, which does not fit the changed embedding: the copy's last
layer is the pool, so its output is the token with or without `output=embedding`. Every
clip's tokens are recomputed through the quantised layers into a token cache of that file
(audio/token_cache.py, no scores), and a few are checked against `cony embed -e` with the
new file (in float: the tokens the encoder trains on are the float path's).

The copy then gets a `quantization` key (docs/model-format.md), so that libcony runs it on
the integer path (models/audio/EXPERIMENTS.md, rule 32): the layers before the adapted ones
take YAMNet's own activation scales (--adapt-quantization, what the converter writes from
the original .tflite); the adapted layers and the pool are calibrated as TensorFlow Lite's
post-training quantisation does (calibrate()), and the adapted layers get int32 biases
(`bias_quantized`). --adapt-quantization none keeps the copy float.

With --cnn-mode continual (models/audio/EXPERIMENTS.md, rule 37; only from layer 25) the
maps are the continual CNN's (docs/continual-cnn.md): `cony embed --mode continual` with
the cut file gives every layer-24 row of the stream (CACHE/acts-l25-continual/, (rows,
W * C)), and a patch is what one continual token reads, layer-24 rows j h - 1 ... j h + 3
of token j (h = stride / 32; row -1 is the start's zeros), from which layer 25 computes
the token's three rows without time padding.
"""

import copy
import json
import os
import struct
import time
import wave
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

from conytrain import REPO, safetensors_io
from conytrain.audio.own import sha256
from conytrain.audio.recipe import (carve_validation_groups, log, read_manifest, run,
                                    validation_groups_of)
from conytrain.audio.token_cache import STRIDE, check_cache, token_path
from conytrain.ref.mobilenet import dequantised, quantised, same_padding

FIRST = 25                  # the default first adapted layer; its input is cached
LAST = 26                   # the last adapted layer: the pointwise one before the pool
CNN_NAME = "yamnet-adapted.safetensors"
TIME_STRIDE = 32            # YAMNet's frames per layer-24 row (continual maps)
K = 3                       # final rows a token pools (96 frames / TIME_STRIDE)
# YAMNet's activation scales: what convert_tflite.py writes from the original .tflite
YAMNET_QUANTIZATION = os.path.join(REPO, "tests", "golden", "yamnet", "quantization.json")


def acts_path(cache, r, first=FIRST, mode="window"):
    name = f"acts-l{first}" + ("" if mode == "window" else f"-{mode}")
    return os.path.join(cache, name, r["set"], os.path.splitext(r["path"])[0] + ".npy")


def mode_of(args):
    return getattr(args, "cnn_mode", "window")


def clip_tokens(wav, stride):
    """Tokens `cony embed --drop-tail` gives a 16 kHz WAV at stride (its help: frames of
    400 samples every 160, windows of 96 frames)."""
    with wave.open(wav) as w:
        if w.getframerate() != 16000:
            raise RuntimeError(f"{wav}: {w.getframerate()} Hz; continual maps need 16 kHz clips")
        frames = 1 + (w.getnframes() - 400) // 160 if w.getnframes() >= 400 else 0
    return 1 + (frames - 96) // stride if frames >= 96 else 0


def rows_of_tokens(tokens):
    """The stream's rows (R, W * C) from the cut file's continual tokens (N, K * W * C),
    each K consecutive rows, one row apart (stride 32): checked to overlap exactly."""
    n, size = tokens.shape
    t = tokens.reshape(n, K, size // K)
    if n > 1 and not np.array_equal(t[1:, :K - 1], t[:-1, 1:]):
        raise RuntimeError("continual maps: consecutive tokens do not share their rows")
    return np.concatenate([t[0], t[1:, K - 1]]) if n else np.zeros((0, size // K), t.dtype)


def continual_patches(rows, n, step=1):
    """(n, (K + 2) * W * C): token j's layer-24 rows j step - 1 ... j step + K, the first
    token's row -1 the start's zeros (layer 25's time padding)."""
    padded = np.concatenate([np.zeros((1, rows.shape[1]), rows.dtype), rows])
    if n and (n - 1) * step + K + 2 > len(padded):
        raise RuntimeError(f"continual maps: {len(rows)} rows cannot give {n} tokens "
                           f"(each reads {K + 2} rows; a clip of 96 + 32 k frames lacks the "
                           "last row)")
    return np.stack([padded[j * step:j * step + K + 2].reshape(-1) for j in range(n)])


def check_layers(meta, first=FIRST):
    words = meta["layers"].split()
    if words[LAST - 1:LAST + 2] != ["dw3x3s1", "conv1x1", "gap"] or meta.get("network") != \
            "mobilenet_v1":
        raise RuntimeError("--adapt-cnn: the CNN is not YAMNet-shaped (layers 25, 26, 27 "
                           f"should be dw3x3s1 conv1x1 gap, not {words[LAST - 1:LAST + 2]})")
    if not (13 <= first <= LAST - 1 and words[first].startswith("dw")):
        raise RuntimeError(f"--adapt-from {first}: the first adapted layer must be one of "
                           f"YAMNet's depthwise layers 13 to {LAST - 1}")
    return words


def map_shape(words, first, height=96, width=64):
    """(H, W) of the map that enters layer FIRST: each stride-2 layer before it halves
    (SAME padding: rounded up)."""
    for w in words[:first]:
        if w.endswith("s2"):
            height, width = -(-height // 2), -(-width // 2)
    return height, width


def cut(tensors, meta, layers):
    """A CNN file's first LAYERS layers: their tensors and the metadata, without labels
    and without the int8 activation quantisation (libcony then runs the cut and the
    adapted files in float, the arithmetic the adaptation trains and is evaluated with)."""
    keep = {k: v for k, v in tensors.items() if int(k.split(".")[1]) < layers}
    meta = {k: v for k, v in meta.items() if k not in ("labels", "quantization")}
    meta["layers"] = " ".join(meta["layers"].split()[:layers])
    return keep, meta


def truncated_cnn(cnn, out, first=FIRST):
    """The CNN file cut before layer FIRST: `cony embed` then outputs the map entering it."""
    tensors, meta = safetensors_io.load(cnn)
    check_layers(meta, first)
    keep, meta = cut(tensors, meta, first)
    safetensors_io.save(out, keep, meta, dtypes_of(keep))
    return out


def dtypes_of(tensors):
    kinds = {np.dtype(np.int8): "I8", np.dtype(np.int64): "I64"}
    return {k: kinds[v.dtype] for k, v in tensors.items() if v.dtype in kinds}


def stage_acts(args, rows):
    """The map entering layer --adapt-from of every clip of rows, once
    (CACHE/acts-l<first>)."""
    first, mode = args.adapt_from, mode_of(args)
    todo = [r for r in rows if not os.path.exists(acts_path(args.cache, r, first, mode))]
    if not todo:
        return
    t0 = time.time()
    trunc = truncated_cnn(args.cnn, os.path.join(args.work, f"cnn-before-l{first}.safetensors"),
                          first)

    def one(r):
        out = acts_path(args.cache, r, first, mode)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        wav = os.path.join(r["root"], r["path"])
        if mode == "continual":       # every row: the tail window's tokens read past the end
            run([args.cony, "embed", "--model", trunc, "--mode", "continual", "--stride",
                 str(TIME_STRIDE), wav, "-o", out + ".tmp.npy"])
            np.save(out + ".tmp.npy", rows_of_tokens(np.load(out + ".tmp.npy")))
        else:
            run([args.cony, "embed", "--drop-tail", "--model", trunc, "--stride", str(STRIDE),
                 wav, "-o", out + ".tmp.npy"])
        os.replace(out + ".tmp.npy", out)      # only finished clips are in the cache

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for k, _ in enumerate(pool.map(one, todo)):
            if k % 1000 == 999:
                log(f"adapt: layer {first - 1} outputs, {k + 1}/{len(todo)} clips "
                    f"({time.time() - t0:.0f} s)")
    log(f"adapt: layer {first - 1} outputs ({mode}) of {len(todo)} clips "
        f"({time.time() - t0:.0f} s)")


class Tail(torch.nn.Module):
    """YAMNet's layers FIRST to 26 (ReLU6 after each) and the mean over positions:
    (B, H * W * C) HWC maps entering layer FIRST -> (B, 1024) embeddings, as libcony
    computes them. weight(i) is layer i's (out, in / groups, kh, kw) weight. continual:
    the K + 2 layer-24 rows of a continual token (continual_patches()) instead of a
    window's map, layer 25 without time padding (docs/continual-cnn.md)."""

    def __init__(self, tensors, words, first=FIRST, continual=False):
        super().__init__()
        self.layers = list(range(first, LAST + 1))
        self.kinds = {i: words[i] for i in self.layers}
        self.weights = torch.nn.ParameterDict()
        self.biases = torch.nn.ParameterDict()
        for i in self.layers:
            name = f"layers.{i}"
            self.weights[str(i)] = torch.nn.Parameter(
                torch.from_numpy(dequantised(tensors, name)).float())
            # a copy: from_numpy would share the file's array, and training would change it
            self.biases[str(i)] = torch.nn.Parameter(
                torch.tensor(tensors[name + ".bias"], dtype=torch.float32))
        self.C = int(tensors[f"layers.{first}.weight"].shape[0])   # depthwise: in = out
        self.H, self.W = map_shape(words, first)
        if continual and first != LAST - 1:
            raise RuntimeError("continual maps: only layers 25 and 26 adapt (--adapt-from 25)")
        self.time_pad = not continual
        if continual:
            self.H = K + 2
        self.out = int(tensors[f"layers.{LAST}.weight"].shape[0])   # the embedding size

    def weight(self, i):
        return self.weights[str(i)]

    def forward(self, a, taps=None):
        """With taps (a list), each layer's output and the pooled one are appended to it."""
        x = a.view(a.shape[0], self.H, self.W, self.C).permute(0, 3, 1, 2)
        for i in self.layers:
            w, b = self.weights[str(i)], self.biases[str(i)]
            if self.kinds[i].startswith("dw"):
                stride = 2 if self.kinds[i].endswith("s2") else 1
                pads = same_pads(x.shape[2], x.shape[3], stride)
                if not self.time_pad:
                    pads = pads[:2] + (0, 0)
                x = F.conv2d(F.pad(x, pads), w, b, stride=stride, groups=x.shape[1])
            else:
                x = torch.einsum("bchw,oc->bohw", x, w[:, :, 0, 0]) + b[:, None, None]
            x = x.clamp(0, 6)
            if taps is not None:
                taps.append(x)
        x = x.mean((2, 3))
        if taps is not None:
            taps.append(x)
        return x


def same_pads(h, w, stride):
    """F.pad's (left, right, top, bottom) for a 3x3 TensorFlow SAME conv: the odd position
    after (ref/mobilenet.same_padding)."""
    (_, top, bottom), (_, left, right) = same_padding(h, stride), same_padding(w, stride)
    return (left, right, top, bottom)


def patch_sampler(acts, y, batch, seed):
    """Batches of single patches, classes drawn equally often: -> (a (B, 6144), y (B,))."""
    rng = np.random.default_rng([seed, 25])
    by_class = [np.flatnonzero(y == c) for c in range(int(y.max()) + 1)]
    by_class = [ix for ix in by_class if len(ix)]
    P = acts.shape[1]

    def draw():
        cls = rng.integers(len(by_class), size=batch)
        clip = np.array([rng.choice(by_class[c]) for c in cls])
        patch = rng.integers(P, size=batch)
        return (torch.from_numpy(acts[clip, patch].astype(np.float32)),
                torch.from_numpy(y[clip]).long())
    return draw


def train_tail(args, acts, y, n_classes, tensors, words, first=FIRST):
    """Layers FIRST to 26 (from tensors) and a linear head trained on single patches of
    acts (clips, patches, H * W * C) labelled y; the head is thrown away, the layers
    returned."""
    torch.manual_seed(args.train_seed)
    tail = Tail(tensors, words, first, mode_of(args) == "continual")
    head = torch.nn.Linear(tail.out, n_classes)
    drop = torch.nn.Dropout(args.adapt_dropout)
    opt = torch.optim.AdamW([{"params": tail.parameters(), "lr": args.adapt_lr},
                             {"params": head.parameters(), "lr": args.adapt_lr * 10}],
                            weight_decay=0.0)
    base = [g["lr"] for g in opt.param_groups]
    draw = patch_sampler(acts, y, args.adapt_batch, args.train_seed)
    t0, seen, right, total = time.time(), 0, 0, 0.0
    for step in range(args.adapt_steps):
        frac = 0.5 * (1 + np.cos(np.pi * step / args.adapt_steps))    # half cosine to 0
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * frac
        a, t = draw()
        emb = tail(a)
        logits = head(drop(emb))
        loss = F.cross_entropy(logits, t, label_smoothing=args.label_smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += len(t)
        right += int((logits.argmax(1) == t).sum())
        total += float(loss) * len(t)
        if (step + 1) % 250 == 0 or step + 1 == args.adapt_steps:
            log(f"adapt: step {step + 1}/{args.adapt_steps}: loss {total / seen:.4f} "
                f"patch acc {right / seen:.3f} ({time.time() - t0:.0f} s)")
            seen, right, total = 0, 0, 0.0
    return tail


def write_cnn(args, tail, tensors, meta, labels, out, acts):
    """A copy of the CNN file with tail's layers, int8 per output channel, up to the pool
    (layer 27): the AudioSet head and its labels are left out. With --adapt-quantization
    (not none) also its activation quantisation, calibrated on acts."""
    tensors, meta = cut(tensors, meta, LAST + 2)        # up to and with the pool
    for i in tail.layers:
        q, s = quantised(tail.weight(i).detach().numpy().astype(np.float64))
        tensors[f"layers.{i}.weight"], tensors[f"layers.{i}.weight_scale"] = q, s
        tensors[f"layers.{i}.bias"] = tail.biases[str(i)].detach().numpy().astype(np.float32)
    meta["adapted"] = json.dumps({
        "from": os.path.basename(args.cnn), "from_sha256": sha256(args.cnn),
        "layers": tail.layers, "classes": labels, "train_seed": args.train_seed,
        "steps": args.adapt_steps, "lr": args.adapt_lr, "batch": args.adapt_batch,
        "head": "left out: YAMNet's AudioSet scores do not fit the adapted embedding",
        "maps": (f"continual, stride {args.stride}: the {K + 2} layer-24 rows a token reads"
                 if mode_of(args) == "continual" else "per window"),
        "by": "training/train_yamnet_audio.py --adapt-cnn (conytrain/audio/adapt.py)"})
    if args.adapt_quantization != "none":
        add_quantization(args, tensors, meta, acts)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    safetensors_io.save(out, tensors, meta, dtypes_of(tensors))
    log(f"adapt: wrote {out} ({os.path.getsize(out)} bytes)")
    return out


def tflite_int8(lo, hi):
    """TensorFlow Lite's int8 activation parameters of a calibrated range [lo, hi]: the
    range widened to hold 0, scale = range / 255 (rounded to float32, as libcony reads
    it), zero point -128 - lo / scale rounded (-128 for a ReLU6 output)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not hi > lo:
        raise RuntimeError("calibration: an output that is 0 on every patch has no scale")
    scale = float(np.float32((hi - lo) / 255.0))
    return [scale, int(np.clip(np.round(-128 - lo / scale), -128, 127))]


@torch.no_grad()
def calibrate(tail, acts, batch=4096):
    """TensorFlow Lite's post-training calibration (its MinMax logger: the least and
    greatest value of each output over all the representative data) of tail's layers
    and the pool: the float model, with the weights as the file holds them, run on every
    patch of acts (clips, patches, H * W * C) -> [[lo, hi], ...], one per tail layer
    (after its ReLU6, so within [0, 6]) and the pool's last."""
    flat = acts.reshape(-1, acts.shape[-1])
    lo = hi = None
    for k in range(0, len(flat), batch):
        taps = []
        tail(torch.from_numpy(np.asarray(flat[k:k + batch], np.float32)), taps)
        mins = np.array([float(t.min()) for t in taps])
        maxs = np.array([float(t.max()) for t in taps])
        lo = mins if lo is None else np.minimum(lo, mins)
        hi = maxs if hi is None else np.maximum(hi, maxs)
    return [[float(a), float(b)] for a, b in zip(lo, hi)]


def set_int32_bias(tensors, i, in_scale):
    """Layer i's TFLite int32 bias (`bias_quantized`) from its float bias: bias / (input
    scale x weight scale), rounded, as libcony would derive it."""
    w_scale = tensors[f"layers.{i}.weight_scale"].astype(np.float32).astype(np.float64)
    bq = np.round(tensors[f"layers.{i}.bias"].astype(np.float64)
                  / (np.float64(np.float32(in_scale)) * w_scale))
    if np.abs(bq).max() >= 2 ** 31:
        raise RuntimeError(f"layers.{i}: an int32 bias outside int32 (scales too small)")
    tensors[f"layers.{i}.bias_quantized"] = bq.astype(np.int64)


def add_quantization(args, tensors, meta, acts):
    """The adapted copy's `quantization` key (the input and the layers before the adapted
    ones from --adapt-quantization; the adapted layers and the pool calibrate()d on acts)
    and its adapted layers' int32 biases (TFLite's: bias / (input scale x weight scale),
    rounded), in tensors and meta; the calibration is noted in the `adapted` key."""
    with open(args.adapt_quantization) as f:
        base = json.load(f)
    words = meta["layers"].split()
    tail = Tail(tensors, words, args.adapt_from,      # the weights as libcony reads them
                mode_of(args) == "continual")
    ranges = calibrate(tail, acts)
    layers = base["layers"][:args.adapt_from] + [tflite_int8(lo, hi) for lo, hi in ranges]
    if len(layers) != len(words):
        raise RuntimeError(f"{args.adapt_quantization}: {len(base['layers'])} layers cannot "
                           f"quantise the first {args.adapt_from} of {len(words)}")
    for i in tail.layers:
        set_int32_bias(tensors, i, layers[i - 1][0])
    meta["quantization"] = json.dumps({"input": base["input"], "layers": layers})
    note = json.loads(meta["adapted"])
    note["quantization"] = {
        "layers before": f"{os.path.basename(args.adapt_quantization)} (YAMNet's .tflite)",
        "calibrated": f"layers {tail.layers[0]} to {LAST + 1}: min/max over {len(acts)} train "
                      f"clips x {acts.shape[1]} patches (TFLite post-training, int8)",
        "ranges": [[round(lo, 6), round(hi, 6)] for lo, hi in ranges]}
    meta["adapted"] = json.dumps(note)
    log(f"adapt: quantisation of layers {tail.layers[0]} to {LAST + 1} calibrated on "
        f"{len(acts) * acts.shape[1]} patches: ranges {note['quantization']['ranges']} -> "
        f"{layers[args.adapt_from:]}")


def repin(classifier, old, new):
    """The classifier's CNN pin (its config's cnn_sha256) moved from OLD to NEW in place:
    the one occurrence in its header replaced, every other byte kept (what the encoder's
    export would write with the new file's SHA-256)."""
    with open(classifier, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = raw[8:8 + n]
    if head.count(old.encode()) != 1:
        raise RuntimeError(f"{classifier}: its config does not pin the CNN {old} (once)")
    with open(classifier, "wb") as f:
        f.write(raw[:8] + head.replace(old.encode(), new.encode()) + raw[8 + n:])


def requantize(args, rows, cnn_dir):
    """--stages quantize (rule 32): the adapted CNN in CNN_DIR given the quantisation the
    refit now writes (its weights unchanged; calibrated on the same clips: rows' train
    split, the refit's), and the classifier beside it pinned to the new file. The encoder
    trains on the float path's tokens, so the refit would write the same classifier."""
    cnn = os.path.join(cnn_dir, CNN_NAME)
    tensors, meta = safetensors_io.load(cnn)
    if json.loads(meta["adapted"])["layers"][0] != args.adapt_from:
        raise RuntimeError(f"{cnn}: not adapted from layer {args.adapt_from}")
    for k in [k for k in tensors if k.endswith(".bias_quantized")]:
        del tensors[k]
    meta.pop("quantization", None)
    note = json.loads(meta["adapted"])
    note.pop("quantization", None)
    meta["adapted"] = json.dumps(note)
    train = [r for r in rows if r["split"] == "train"]
    stage_acts(args, train)
    acts = load_patches(args, train)
    old = sha256(cnn)
    add_quantization(args, tensors, meta, acts)
    safetensors_io.save(cnn, tensors, meta, dtypes_of(tensors))
    new = sha256(cnn)
    repin(os.path.join(cnn_dir, "transformer.safetensors"), old, new)
    log(f"adapt: {cnn} quantised ({os.path.getsize(cnn)} bytes, SHA-256 {new}); "
        "transformer.safetensors pinned to it")


@torch.no_grad()
def write_tokens(args, rows, cnn, cache):
    """Every clip's tokens through the adapted file's layers (from --adapt-from), into a
    token cache of that file; a few checked against `cony embed -e`."""
    mine = copy.copy(args)
    mine.cnn, mine.cache = cnn, cache
    mode = mode_of(args)
    stride = args.stride if mode == "continual" else STRIDE
    check_cache(cnn, cache, stride=stride, mode=mode)
    tensors, meta = safetensors_io.load(cnn)
    tail = Tail(tensors, meta["layers"].split(), args.adapt_from,    # as libcony reads them
                mode == "continual")
    for r in rows:
        out = token_path(cache, r)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        np.save(out, tail(torch.from_numpy(clip_acts(args, r))).numpy())
    worst = 0.0
    tmp = os.path.join(args.work, "adapt-check.npy")
    for r in rows[::max(1, len(rows) // 5)]:
        run([args.cony, "embed", "--drop-tail", "-e", "--precision", "float", "--model", cnn,
             "--stride", str(stride)] + (["--mode", "continual"] if mode == "continual" else [])
            + [os.path.join(r["root"], r["path"]), "-o", tmp])
        got, want = np.load(tmp), np.load(token_path(cache, r))
        if got.shape != want.shape:
            raise RuntimeError(f"adapt: {r['path']}: cony embed gives {got.shape} tokens, "
                               f"the recomputed ones are {want.shape}")
        worst = max(worst, float(np.abs(got - want).max()))
    log(f"adapt: tokens of {len(rows)} clips in {cache}; against cony embed -e: "
        f"max |diff| {worst:.1e}")
    if worst > 1e-3:
        raise RuntimeError("adapt: the recomputed tokens disagree with cony embed's")
    return mine


def also_rows(args):
    """--adapt-also: another data set's validation and valx clips (rule 20's measurement
    through compare_yamnet_recipes.py), tokens of the adapted CNN included."""
    if not args.adapt_also:
        return []
    rows, _ = read_manifest(args.adapt_also)
    rows = carve_validation_groups(
        rows, validation_groups_of(args.val_from, args.val_frac, args.seed, args.val_scope))
    name = os.path.basename(os.path.normpath(args.adapt_also))
    rows = [r for r in rows if r["split"] in ("val", "valx")]
    for r in rows:
        r["root"], r["set"] = args.adapt_also, name
    return rows


def clip_acts(args, r):
    """Clip r's patches (patches, size) entering layer --adapt-from: the cached map
    (window), or its tokens' continual patches (continual_patches())."""
    a = np.load(acts_path(args.cache, r, args.adapt_from, mode_of(args)))
    if mode_of(args) != "continual":
        return a
    n = clip_tokens(os.path.join(r["root"], r["path"]), args.stride)
    return continual_patches(a, n, args.stride // TIME_STRIDE)


def load_patches(args, rows):
    """clip_acts() of rows as one (clips, patches, size) array (load_acts())."""
    if mode_of(args) != "continual":
        return load_acts([acts_path(args.cache, r, args.adapt_from) for r in rows])
    first = clip_acts(args, rows[0])
    acts = np.empty((len(rows),) + first.shape, first.dtype)
    acts[0] = first
    for k, r in enumerate(rows[1:], 1):
        acts[k] = clip_acts(args, r)
    return acts


def load_acts(paths):
    """The cached maps of paths as one (clips, patches, size) array, filled in place (a
    list then np.stack would hold them twice: 10 GB for layer 22's maps)."""
    first = np.load(paths[0])
    acts = np.empty((len(paths),) + first.shape, first.dtype)
    acts[0] = first
    for k, p in enumerate(paths[1:], 1):
        acts[k] = np.load(p)
    return acts


def adapted(args, rows, labels, cnn_dir, tag):
    """Adapts the CNN on rows' train split -> CNN_DIR/yamnet-adapted.safetensors, and
    returns args with it as --cnn and its token cache (WORK/TAG-tokens) as --cache."""
    train = [r for r in rows if r["split"] == "train"]
    need = [r for r in rows if r["split"] != "test"] + also_rows(args)
    stage_acts(args, need)
    tensors, meta = safetensors_io.load(args.cnn)
    words = check_layers(meta, args.adapt_from)
    t0 = time.time()
    acts = load_patches(args, train)
    y = np.array([labels.index(r["label"]) for r in train])
    log(f"adapt: layers {args.adapt_from} to {LAST} on {len(train)} train clips "
        f"({acts.shape[1]} {mode_of(args)} patches each), {args.adapt_steps} steps of {args.adapt_batch} at "
        f"{args.adapt_lr} (loaded in {time.time() - t0:.0f} s)")
    tail = train_tail(args, acts, y, len(labels), tensors, words, args.adapt_from)
    cnn = write_cnn(args, tail, tensors, meta, labels, os.path.join(cnn_dir, CNN_NAME), acts)
    del acts
    return write_tokens(args, need, cnn, os.path.join(args.work, tag + "-tokens"))
