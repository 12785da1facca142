"""Trains the continual video tagger (models/video-tagger/): a CoNy encoder over the ImageNet
MobileNet-v2's 1280-d pooled embeddings with its 1001 labels, distilled from the
MobileNet's own per-frame softmax scores, on camera-like sequences over photographs
(conytrain.video.camera).

    /usr/bin/python3 training/train_video_tagger.py --photos DEBS_ROOT --work out/video-tagger

DEBS_ROOT: the Debian packages of PHOTOS unpacked into one folder (`apt-get download
opencv-doc python3-skimage python3-sklearn` and `dpkg-deb -x` each; training/
train_video_tagger.sh does it). Stages (all by default; --stages picks some):

  photos  each photograph decoded by GStreamer, centre-cropped to 4:3, 640x480 RGB
          -> WORK/photos/NAME.npy
  frames  sequences per split (photographs split as PHOTOS says), written as raw RGB
          -> WORK/seq/SPLIT_I.rgb and .json (its shots)
  embed   each sequence through `filesrc ! rawvideoparse ! conyframeembed output=embedding
          ! filesink` (libcony) -> .emb.npy (T, 1280) float32 and the MobileNet's softmax of
          its fc layer on them -> .scores.npy (T, 1001) float16
  train   windows of n frames ending anywhere in a train sequence (a --warmup-fraction
          of them the first w < n frames), target the MobileNet's scores of the newest frame
          (--target-mean K: their mean over the newest K frames), soft cross-entropy;
          `cony` attention, then k-means landmarks and fine-tuning as `cony-fixed`;
          exported -> MODELS/tagger.safetensors
  eval    the exported file through `cony classify` on each val/test sequence: top-1
          agreement, flips per minute, steps to settle after a cut, accuracy on known
          objects -> WORK/eval.json and a table
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from conytrain import REPO, safetensors_io
from conytrain.audio.audioset_tagger import run
from conytrain.audio.yamnet import fc_layer
from conytrain.export import export_model
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint
from conytrain.train import distill_epochs, train_then_fix_landmarks
from conytrain.video import camera

FPS = 10
OCV = "usr/share/doc/opencv-doc/examples/"
SKI = "usr/lib/python3/dist-packages/skimage/data/"
SKL = "usr/lib/python3/dist-packages/sklearn/datasets/images/"
# (package, file in it, split, accepted ImageNet labels where the object is known)
PHOTOS = [
    ("opencv-doc", OCV + "data/baboon.jpg", "test", ["baboon"]),
    ("opencv-doc", OCV + "data/orange.jpg", "test", ["orange"]),
    ("opencv-doc", OCV + "data/squirrel_cls.jpg", "test",
     ["fox squirrel, eastern fox squirrel, Sciurus niger"]),
    ("opencv-doc", OCV + "data/messi5.jpg", "test", ["soccer ball"]),
    ("opencv-doc", OCV + "data/building.jpg", "test", []),
    ("opencv-doc", OCV + "data/stuff.jpg", "test", []),
    ("opencv-doc", OCV + "text/scenetext03.jpg", "test", []),
    ("python3-skimage", SKI + "chelsea.png", "test", ["tabby, tabby cat", "tiger cat",
                                                      "Egyptian cat"]),
    ("python3-skimage", SKI + "coffee.png", "test", ["espresso", "cup"]),
    ("python3-skimage", SKI + "rocket.jpg", "test", ["missile", "projectile, missile",
                                                     "space shuttle"]),
    ("python3-skimage", SKI + "motorcycle_left.png", "test",
     ["moped", "motor scooter, scooter"]),
    ("python3-skimage", SKI + "camera.png", "test", ["tripod"]),
    ("opencv-doc", OCV + "data/butterfly.jpg", "val", []),
    ("opencv-doc", OCV + "data/home.jpg", "val", []),
    ("opencv-doc", OCV + "data/aero1.jpg", "val", []),
    ("opencv-doc", OCV + "text/scenetext05.jpg", "val", []),
    ("opencv-doc", OCV + "data/rubberwhale1.png", "val", []),
] + [("opencv-doc", OCV + p, "train", []) for p in (
    "data/apple.jpg", "data/fruits.jpg", "data/HappyFish.jpg", "data/aero3.jpg",
    "data/leuvenA.jpg", "data/box_in_scene.png", "data/graf1.png", "data/basketball1.png",
    "data/smarties.png", "data/ela_original.jpg", "data/aloeL.jpg", "data/chicky_512.png",
    "data/board.jpg", "data/starry_night.jpg", "alphamat/input_images/plant.jpg",
    "text/scenetext01.jpg", "text/scenetext02.jpg", "text/scenetext04.jpg",
    "text/scenetext06.jpg")] + [("python3-skimage", SKI + p, "train", []) for p in (
        "astronaut.png", "coins.png", "moon.png", "gravel.png", "grass.png", "brick.png",
        "hubble_deep_field.jpg", "retina.jpg")] + [
    ("python3-sklearn", SKL + "china.jpg", "train", []),
    ("python3-sklearn", SKL + "flower.jpg", "train", [])]

T0 = time.time()


def log(msg):
    print(f"train_video_tagger: [{time.time() - T0:.0f} s] {msg}", file=sys.stderr, flush=True)


def photo_name(path):
    return os.path.splitext(os.path.basename(path))[0]


# ----------------------------------------------------------------------------- data
def stage_photos(args):
    out = os.path.join(args.work, "photos")
    os.makedirs(out, exist_ok=True)
    for pkg, rel, _, _ in PHOTOS:
        dst = os.path.join(out, photo_name(rel) + ".npy")
        if os.path.exists(dst):
            continue
        src = os.path.join(args.photos, rel)
        if not os.path.exists(src):
            raise RuntimeError(f"{src}: missing (unpack Debian's {pkg} into {args.photos})")
        raw = dst + ".rgb"
        run(["gst-launch-1.0", "-q", "filesrc", f"location={src}", "!", "decodebin", "!",
             "videoconvert", "!", "aspectratiocrop", "aspect-ratio=4/3", "!", "videoscale",
             "!", "videoconvert", "!",
             "video/x-raw,format=RGB,width=640,height=480,pixel-aspect-ratio=1/1", "!",
             "filesink", f"location={raw}"])
        img = np.fromfile(raw, np.uint8)[:640 * 480 * 3].reshape(480, 640, 3)
        np.save(dst, img)
        os.remove(raw)
    log(f"photos: {len(PHOTOS)} in {out}")


def load_photos(args, split):
    return [(photo_name(r), np.load(os.path.join(args.work, "photos", photo_name(r) + ".npy"))
             .astype(np.float32)) for _, r, s, _ in PHOTOS if s == split]


SEQUENCES = {"train": 30, "val": 4, "test": 8}


def seq_paths(args, split):
    d = os.path.join(args.work, "seq")
    return [os.path.join(d, f"{split}_{i:02d}") for i in range(SEQUENCES[split])]


def stage_frames(args):
    os.makedirs(os.path.join(args.work, "seq"), exist_ok=True)
    for k, split in enumerate(("train", "val", "test")):
        photos = load_photos(args, split)
        for i, base in enumerate(seq_paths(args, split)):
            if os.path.exists(base + ".json"):
                continue
            rng = np.random.default_rng([args.seed, k, i])
            frames, shots = camera.sequence(photos, args.frames_per_sequence, rng)
            frames.tofile(base + ".rgb")
            with open(base + ".json", "w") as f:
                json.dump({"frames": len(frames), "shots": shots}, f)
        log(f"frames: {split} {len(seq_paths(args, split))} sequences")


def mobilenet_scores(emb, fc):
    z = emb @ fc[0].T + fc[1]
    z -= z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def stage_embed(args):
    t, m = safetensors_io.load(args.cnn)
    fc = fc_layer(t, m["layers"].split())
    t0, n = time.time(), 0
    for split in ("train", "val", "test"):
        for base in seq_paths(args, split):
            if os.path.exists(base + ".scores.npy"):
                continue
            raw = base + ".emb.f32"
            run(["gst-launch-1.0", "-q", "filesrc", f"location={base}.rgb", "blocksize="
                 + str(camera.SIZE * camera.SIZE * 3), "!", "rawvideoparse",
                 f"width={camera.SIZE}", f"height={camera.SIZE}", "format=rgb",
                 f"framerate={FPS}/1", "!", "conyframeembed", f"model={args.cnn}",
                 "output=embedding", "!", "filesink", f"location={raw}"])
            emb = np.fromfile(raw, np.float32).reshape(-1, 1280)
            np.save(base + ".emb.npy", emb)
            os.remove(raw)
            np.save(base + ".scores.npy", mobilenet_scores(emb, fc).astype(np.float16))
            n += len(emb)
        log(f"embed: {split} done ({n} frames embedded, {time.time() - t0:.0f} s)")


def load_split(args, split):
    out = []
    for base in seq_paths(args, split):
        with open(base + ".json") as f:
            meta = json.load(f)
        out.append((np.load(base + ".emb.npy"), np.load(base + ".scores.npy"), meta))
    return out


# ----------------------------------------------------------------------------- training
class Windows:
    """Training windows over the train sequences: batch(size) -> (x (B, w, 1280),
    offsets (B,), target scores (B, 1001))."""

    def __init__(self, seqs, window, positional_rows, args, seed):
        self.seqs, self.n, self.T, self.a = seqs, window, positional_rows, args
        self.rng = np.random.default_rng([seed, 7])

    def batch(self, size):
        rng, n = self.rng, self.n
        warm = rng.random() < self.a.warmup_fraction
        w = int(rng.integers(1, n)) if warm else n
        xs, offs, ys = [], [], []
        for _ in range(size):
            x, s, _ = self.seqs[int(rng.integers(len(self.seqs)))]
            end = w if warm else int(rng.integers(w, len(x) + 1))
            xs.append(x[end - w:end])
            k = min(self.a.target_mean, end)
            ys.append(s[end - k:end].astype(np.float32).mean(0))
            offs.append(0 if warm else int(rng.integers(0, self.T)))
        return (torch.from_numpy(np.stack(xs)), torch.tensor(offs, dtype=torch.long),
                torch.from_numpy(np.stack(ys)))


def soft_cross_entropy(logits, target):
    return -(target * F.log_softmax(logits, 1)).sum(1).mean()


def train_epochs(model, sampler, epochs, batches, batch, lr, weight_decay):
    distill_epochs(model, sampler, epochs, batches, batch, lr, weight_decay,
                   soft_cross_entropy, log, "CE", "the MobileNet's")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def frontend(args):
    return {"type": "video", "cnn": os.path.basename(args.cnn), "cnn_sha256": sha256(args.cnn),
            "cnn_output": "embedding", "width": camera.SIZE, "height": camera.SIZE,
            "channels": 3, "format": "RGB", "fps": FPS, "every": 1}


def init_from_fc(model, fc, x, alpha):
    """Starts the encoder as the MobileNet's own head over a temporal mean: input_proj
    the d leading right singular vectors V of the fc weights W (x -> V (x - mean x)),
    uniform attention (Q = K = 0) whose values are the tokens themselves and whose output
    is alpha times their window mean, the feed-forward's output 0, so the newest frame's
    logits start as W V^T LN(u_t + alpha mean_window u) s + (W mean x + b), s the mean
    per-frame spread of u: the fc's logits of a smoothed embedding up to the rank-d
    bottleneck and the layer norms. Without this, 30 photographs cannot teach 1000
    classes (models/video/EXPERIMENTS.md)."""
    W, b = (np.asarray(a, np.float64) for a in fc)
    d = model.config["d"]
    V = np.linalg.svd(W, full_matrices=False)[2][:d]            # (d, 1280)
    mu = x.reshape(-1, x.shape[-1]).astype(np.float64).mean(0)
    u = (x.reshape(-1, x.shape[-1])[::7] - mu) @ V.T
    spread = float(u.std(1).mean())
    with torch.no_grad():
        t = lambda a: torch.tensor(a, dtype=torch.float32)     # noqa: E731
        model.input_proj.weight.copy_(t(V))
        model.input_proj.bias.copy_(t(-V @ mu))
        model.pos_embedding.mul_(0.1)
        att = model.blocks[0].attn
        att.in_proj_weight.zero_()
        att.in_proj_bias.zero_()
        att.in_proj_weight[2 * d:].copy_(torch.eye(d))
        att.out_proj.weight.copy_(alpha * torch.eye(d))
        att.out_proj.bias.zero_()
        model.blocks[0].ff[2].weight.zero_()
        model.blocks[0].ff[2].bias.zero_()
        model.classifier.weight.copy_(t(W @ V.T * spread * (1 + alpha)))
        model.classifier.bias.copy_(t(W @ mu + b))


def stage_train(args, labels):
    torch.manual_seed(args.train_seed)
    seqs = load_split(args, "train")
    log(f"train: {len(seqs)} sequences, {sum(len(s[0]) for s in seqs)} frames")
    model = ConyEncoderClassifier(1280, args.d, args.heads, args.ff, 1, args.window,
                                  args.landmarks, "cony", labels,
                                  positional_encoding="learned", frontend=frontend(args),
                                  dropout=args.dropout)
    sampler = Windows(seqs, args.window, model.config["positional_rows"], args,
                      args.train_seed)
    if args.init == "fc":
        t, m = safetensors_io.load(args.cnn)
        init_from_fc(model, fc_layer(t, m["layers"].split()),
                     np.concatenate([s[0] for s in seqs]), args.alpha)
        for p in (model.input_proj.weight, model.input_proj.bias, model.classifier.weight):
            p.requires_grad_(not args.freeze_head)
        log(f"started from the MobileNet's fc (rank {args.d}, alpha {args.alpha}); "
            f"head {'frozen' if args.freeze_head else 'trained'}")
    train_then_fix_landmarks(model, sampler, args, train_epochs, log)
    os.makedirs(args.models, exist_ok=True)
    save_checkpoint(model, os.path.join(args.work, os.path.basename(os.path.normpath(
        args.models)) + ".pt"))
    path = os.path.join(args.models, "tagger.safetensors")
    export_model(model, path, args.dtype)
    log(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ----------------------------------------------------------------------------- golden
GOLDEN = os.path.join(REPO, "tests", "golden", "video-tagger")
PHOTOS_WEBM = os.path.join(REPO, "tests", "golden", "imagenet", "photos.webm")
CAMERA_GOLDEN_FRAMES = 120


def chain_tokens(cnn, video, work):
    """The MobileNet embeddings of every frame of `video` through the element chain
    (decodebin ! videoconvert ! conyframeembed output=embedding): (T, 1280) float32."""
    raw = os.path.join(work, "chain-tokens.f32")
    run(["gst-launch-1.0", "-q", "filesrc", f"location={video}", "!", "decodebin", "!",
         "videoconvert", "!", "conyframeembed", f"model={cnn}", "output=embedding", "!",
         "filesink", f"location={raw}"])
    x = np.fromfile(raw, np.float32).reshape(-1, 1280)
    os.remove(raw)
    return x


def torch_stream_logits(model_path, tokens):
    """The PyTorch reference of the stepped model (ref.model.stream_logits) on tokens."""
    from conytrain.golden.model import load_model
    model = load_model(model_path)
    with torch.no_grad():
        return model.stream_logits(torch.from_numpy(np.asarray(tokens, np.float32))).numpy()


def stage_golden(args, model_path):
    """tests/golden/video-tagger/: photos.webm's tokens through the element chain and the
    PyTorch logits of the shipped model on them (what `cony classify` must equal)."""
    os.makedirs(GOLDEN, exist_ok=True)
    x = chain_tokens(args.cnn, PHOTOS_WEBM, args.work)
    np.save(os.path.join(GOLDEN, "tokens.npy"), x)
    np.save(os.path.join(GOLDEN, "logits.npy"), torch_stream_logits(model_path, x))
    log(f"golden: {len(x)} frames of photos.webm -> {GOLDEN}")
    # the first 12 s of test sequence 2 (messi5, squirrel_cls, messi5: pans, blur, cuts):
    # its tokens (float16) and the per-frame MobileNet's top-1, for the flip check
    base = seq_paths(args, "test")[2]
    x = np.load(base + ".emb.npy")[:CAMERA_GOLDEN_FRAMES].astype(np.float16)
    t, m = safetensors_io.load(args.cnn)
    top = mobilenet_scores(x.astype(np.float32), fc_layer(t, m["layers"].split())).argmax(1)
    np.save(os.path.join(GOLDEN, "camera_tokens.npy"), x)
    np.save(os.path.join(GOLDEN, "camera_mobilenet_top1.npy"), top.astype(np.int32))


# ----------------------------------------------------------------------------- evaluation
def flips(top):
    return int((top[1:] != top[:-1]).sum())


def settle_steps(top, ref, shots, hold=5):
    """Per shot after a cut: steps from the cut until `top` equals the shot's most
    frequent per-frame label `ref` for `hold` steps in a row (the shot's length if never)."""
    out = []
    for start, n, _ in shots[1:]:
        mode = np.bincount(ref[start:start + n]).argmax()
        ok = top[start:start + n] == mode
        s = n
        for t in range(n - hold + 1):
            if ok[t:t + hold].all():
                s = t
                break
        out.append(s)
    return out


def window_mean(s, n):
    """Each step's mean of the per-frame scores over its last n frames (a plain moving
    average, the baseline a continual model should beat)."""
    c = np.cumsum(np.vstack([np.zeros((1, s.shape[1])), s.astype(np.float64)]), 0)
    lo = np.maximum(0, np.arange(len(s)) - n + 1)
    return (c[1:] - c[lo]) / (np.arange(len(s)) + 1 - lo)[:, None]


def metrics(tops, refs, metas, known):
    """A, F, S, K (models/video/EXPERIMENTS.md) of top-1 streams against the per-frame
    MobileNet's (refs); known: {photograph: accepted label indices}."""
    steps = sum(len(t) for t in tops)
    minutes = steps / FPS / 60
    settle, k_ok, k_n = [], 0, 0
    for top, ref, meta in zip(tops, refs, metas):
        settle += settle_steps(top, ref, meta["shots"])
        for start, n, name in meta["shots"]:
            if name in known:
                k_ok += int(np.isin(top[start:start + n], known[name]).sum())
                k_n += n
    return {"top1_agreement": sum(int((t == r).sum()) for t, r in zip(tops, refs)) / steps,
            "flips_per_minute": sum(flips(t) for t in tops) / minutes,
            "settle_steps": {"median": float(np.median(settle)),
                             "p90": float(np.percentile(settle, 90)),
                             "mean": float(np.mean(settle))},
            "known_object_accuracy": k_ok / max(1, k_n), "known_object_frames": k_n,
            "steps": steps, "cuts": len(settle)}


def stage_eval(args, labels, model_path, split="test"):
    idx = {l: i for i, l in enumerate(labels)}
    known = {photo_name(r): [idx[l] for l in acc] for _, r, _, acc in PHOTOS if acc}
    tmp = os.path.join(args.work, "eval-tmp")
    os.makedirs(tmp, exist_ok=True)
    n = json.loads(safetensors_io.load(model_path)[1]["config"])["window"]
    systems = {"tagger (C, cony-fixed)": [], "MobileNet per frame": [],
               f"MobileNet's scores, mean of {n} frames": [],
               "MobileNet's scores, mean of 5 frames": []}
    refs, metas = [], []
    for emb, s, meta in load_split(args, split):
        src, out = os.path.join(tmp, "in.npy"), os.path.join(tmp, "out.npy")
        np.save(src, emb)
        run([args.cony, "classify", "--model", model_path, src, "-o", out])
        ref = s.astype(np.float32).argmax(1)
        for (name, tops), top in zip(systems.items(), (
                np.load(out).argmax(1), ref, window_mean(s, n).argmax(1),
                window_mean(s, 5).argmax(1))):
            tops.append(top)
        refs.append(ref)
        metas.append(meta)
    res = {"split": split, "sequences": SEQUENCES[split],
           "systems": {k: metrics(t, refs, metas, known) for k, t in systems.items()}}
    name = os.path.basename(os.path.normpath(args.models))
    with open(os.path.join(args.work, f"eval-{split}-{name}.json"), "w") as f:
        json.dump(res, f, indent=1)
    r0 = res["systems"]["tagger (C, cony-fixed)"]
    print(f"{split}: {res['sequences']} sequences, {r0['steps']} steps "
          f"({r0['steps'] / FPS / 60:.1f} min), {r0['cuts']} cuts, "
          f"{r0['known_object_frames']} known-object frames")
    print("| | top-1 = MobileNet's | flips / min | settle after a cut (median / p90 steps) "
          "| known-object accuracy |")
    print("|---|---|---|---|---|")
    for k, r in res["systems"].items():
        print(f"| {k} | {100 * r['top1_agreement']:.1f} % | {r['flips_per_minute']:.1f} | "
              f"{r['settle_steps']['median']:.0f} / {r['settle_steps']['p90']:.0f} | "
              f"{100 * r['known_object_accuracy']:.1f} % |")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos", default="out/video-photos-debs",
                    help="folder the Debian packages are unpacked into")
    ap.add_argument("--cony", default=os.path.join(REPO, "build", "tools", "cony"))
    ap.add_argument("--cnn", default=os.path.join(REPO, "models", "imagenet",
                                                  "mobilenet_v2.safetensors"))
    ap.add_argument("--work", default="out/video-tagger")
    ap.add_argument("--models", default=os.path.join(REPO, "models", "video-tagger"))
    ap.add_argument("--stages", default="photos,frames,embed,train,eval")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--train-seed", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--frames-per-sequence", type=int, default=240)
    ap.add_argument("--init", choices=("fc", "random"), default="fc",
                    help="fc: start as the MobileNet's head over a window mean "
                         "(init_from_fc); random: from scratch")
    ap.add_argument("--alpha", type=float, default=2.0,
                    help="--init fc: weight of the window mean against the newest frame")
    ap.add_argument("--freeze-head", type=int, default=1,
                    help="--init fc: keep input_proj and the classifier weights as started")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--warmup-fraction", type=float, default=0.2)
    ap.add_argument("--target-mean", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--finetune-epochs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=1e-2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--kmeans-windows", type=int, default=256)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    args = ap.parse_args()
    torch.set_num_threads(max(1, args.threads))
    os.makedirs(args.work, exist_ok=True)
    stages = args.stages.split(",")
    labels = json.loads(safetensors_io.load(args.cnn)[1]["labels"])
    if "photos" in stages:
        stage_photos(args)
    if "frames" in stages:
        stage_frames(args)
    if "embed" in stages:
        stage_embed(args)
    if "train" in stages:
        stage_train(args, labels)
    path = os.path.join(args.models, "tagger.safetensors")
    if "golden" in stages:
        stage_golden(args, path)
    if "eval" in stages:
        stage_eval(args, labels, path, "val")
        stage_eval(args, labels, path, "test")
