#!/usr/bin/python3
"""Trains a classifier for your own classes: a folder of media files -> a model file.

    /usr/bin/python3 training/train_your_own.py DATA_DIR -o MODEL.safetensors

DATA_DIR holds one sub-folder per class (its name is the label) of media files, any
format GStreamer decodes (WAV, Ogg, MP3, video files' audio ...). Steps:

  1. embeddings: every file goes through the inference front end itself,
     `uridecodebin ! audioconvert ! audioresample ! conymel ! conyvggish model=CNN`
     (YAMNet, models/yamnet/yamnet.safetensors, unless --cnn; a MobileNet such as YAMNet
     gives its pooled embedding, conymel preset=yamnet for YAMNet's front end): one token
     per 0.25 s (the tail, or a file shorter than 0.96 s, in one more window padded with
     silence: conyvggish pad-tail). Files GStreamer cannot decode, or without
     audio, are reported and skipped.
  2. "other": unless --no-other (or DATA_DIR has its own "other" folder), a class of
     sounds that are none of yours, generated here without network
     (training/conytrain/audio/other.py: espeak-ng speech, FluidSynth music, noise, hum,
     near-silence; a kind one of your labels names is left out), as many files as your
     classes have on average, as long as their median file. Without it a 2-class model
     has never heard anything else and calls music "speech" at 0.99.
  3. split by file: --val-fraction of each class's files (at least one when the class
     has two or more) are held out for validation, so no clip is in both sets.
  4. window: the transformer's context n, by default the 10th percentile of the training
     files' token counts, clamped to 2 .. 16 (0.5 .. 4 s); files shorter than the window
     are listed with a warning (they cannot give a full window and are left out:
     training on them alone would teach only warm-up steps); none long enough: refused.
  5. training: the CoNy encoder-classifier (training/conytrain/ref; d 32, 2 heads, continual
     Nystrom landmarks) on windows of n tokens cut from the training files.
  6. accuracy: the exported file is run by libcony (`cony classify`, the engine the
     conytransformer element uses) on every validation file from its first token;
     printed per step (steps with a full window) and per file (majority of its steps).

The model records its labels, its CNN (file name, SHA-256 and, for a pooled embedding,
cnn_output) and the front end (mel and window parameters) in its config's `frontend`;
conytransformer refuses tokens of another CNN. Use it as
`conyvggish model=CNN ! conytransformer model=MODEL.safetensors`, e.g.
`pipelines/file.sh clip.wav CNN MODEL.safetensors`.

Needs python3-gi, python3-torch, numpy, the plugin (GST_PLUGIN_PATH, default build/gst)
and the `cony` tool (--cony, default build/tools/cony).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from conytrain import REPO

ROOT = REPO

TOKEN_SECONDS = 0.25     # conyvggish's default stride: 25 mel frames of 10 ms
FIRST_TOKEN_SECONDS = 0.96


def log(msg):
    print(msg, flush=True)


def warn(msg):
    print(f"train_your_own.py: warning: {msg}", file=sys.stderr, flush=True)


def find_files(data_dir):
    """{label: [paths]} from DATA_DIR/LABEL/**; labels sorted."""
    if not os.path.isdir(data_dir):
        sys.exit(f"train_your_own.py: {data_dir} is not a folder")
    classes = {}
    for label in sorted(os.listdir(data_dir)):
        sub = os.path.join(data_dir, label)
        if not os.path.isdir(sub) or label.startswith("."):
            continue
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sub) for f in fs
                       if not f.startswith("."))
        if files:
            classes[label] = files
    if len(classes) < 2:
        sys.exit(f"train_your_own.py: {data_dir} needs at least two sub-folders (one per "
                 f"class) holding media files; found {sorted(classes) or 'none'}")
    return classes


class Embedder:
    """The inference front end (conymel ! conyvggish) on whole files, through GStreamer."""

    def __init__(self, cnn):
        self.mel_props, self.cnn_props = token_props(cnn)
        if "GST_PLUGIN_PATH" not in os.environ:
            os.environ["GST_PLUGIN_PATH"] = os.path.join(ROOT, "build", "gst")
        import gi
        gi.require_version("Gst", "1.0")
        from gi.repository import Gst
        Gst.init(None)
        self.Gst = Gst
        self.cnn = cnn

    def tokens(self, path):
        """(steps, E) float32 embeddings of @path's audio; raises RuntimeError naming why not."""
        Gst = self.Gst
        uri = Gst.filename_to_uri(os.path.abspath(path))
        pipe = Gst.parse_launch(
            f'uridecodebin uri="{uri}" ! audioconvert ! audioresample ! conymel {self.mel_props} '
            f'! conyvggish model="{self.cnn}" {self.cnn_props} batch=64 '
            f'! appsink name=sink sync=false')
        sink = pipe.get_by_name("sink")
        bus = pipe.get_bus()
        pipe.set_state(Gst.State.PLAYING)
        chunks, error = [], None
        try:
            while True:
                sample = sink.emit("try-pull-sample", Gst.SECOND // 4)
                if sample is not None:
                    buf = sample.get_buffer()
                    ok, info = buf.map(Gst.MapFlags.READ)
                    chunks.append(np.frombuffer(info.data, dtype=np.float32).copy())
                    buf.unmap(info)
                    dims = sample.get_caps().get_structure(0).get_string("dimensions")
                    dim = int(dims.split(":")[0])
                    continue
                if sink.get_property("eos"):
                    break
                msg = bus.pop_filtered(Gst.MessageType.ERROR)
                if msg is not None:
                    err, dbg = msg.parse_error()
                    error = err.message
                    if "not-linked" in (dbg or "") or "linking" in (dbg or ""):
                        error = "no audio track"
                    break
        finally:
            pipe.set_state(Gst.State.NULL)
        if error:
            raise RuntimeError(error)
        if not chunks:
            return np.zeros((0, 0), np.float32)
        return np.concatenate(chunks).reshape(-1, dim)


def split_by_file(classes, fraction, rng):
    """{label: (train paths, val paths)}: a share of each class's files held out."""
    out = {}
    for label, files in classes.items():
        order = list(rng.permutation(len(files)))
        k = int(round(fraction * len(files)))
        if fraction > 0 and len(files) >= 2:
            k = min(max(k, 1), len(files) - 1)
        val = sorted(files[i] for i in order[:k])
        out[label] = ([f for f in files if f not in val], val)
    return out


OTHER = "other"


def embed_splits(embedder, splits, train_tokens, val_tokens):
    """Embeds the files of @splits ({label: (train, val)}) into {path: (tokens, label)}."""
    for label, (train, val) in splits.items():
        for dest, paths in ((train_tokens, train), (val_tokens, val)):
            for p in paths:
                try:
                    t = embedder.tokens(p)
                except RuntimeError as e:
                    warn(f"{p}: skipped ({e})")
                    continue
                if len(t) == 0:
                    warn(f"{p}: skipped (shorter than {FIRST_TOKEN_SECONDS} s: no token)")
                    continue
                dest[p] = (t, label)
        log(f"{label}: {len(train)} training files, {len(val)} validation files")


def other_files(classes, lengths, seed, out_dir):
    """Generated "other" clips (conytrain.audio.other): as many as a class has files on
    average, three of each kind at least, as long as the median training file (3-8 s)."""
    from conytrain.audio import other
    kinds = other.kinds_for(classes)
    count = max(3 * len(kinds), round(sum(len(f) for f in classes.values()) / len(classes)))
    seconds = float(np.clip(FIRST_TOKEN_SECONDS + (np.median(lengths) - 1) * TOKEN_SECONDS, 3, 8))
    log(f'{OTHER}: {count} generated clips of {seconds:.1f} s ({", ".join(kinds)}; '
        "--no-other leaves the class out)")
    return other.make_clips(out_dir, kinds, count, seconds, seed, warn)


def choose_window(lengths, requested):
    if requested:
        return requested
    return int(np.clip(np.percentile(lengths, 10), 2, 16))


def windows_of(tokens, n, hop):
    return [tokens[s:s + n] for s in range(0, len(tokens) - n + 1, hop)]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cnn_metadata(cnn):
    from conytrain import safetensors_io
    return safetensors_io.load(cnn)[1]


def token_props(cnn):
    """(conymel, conyvggish) properties for the tokens of @cnn: YAMNet's log-mel preset
    where its front end is YAMNet's, the pooled embedding of a MobileNet (its last layer
    is the 521 AudioSet scores), a VGGish-style CNN's own output otherwise."""
    meta = cnn_metadata(cnn)
    fe = json.loads(meta.get("frontend", "{}"))
    return ("preset=yamnet" if fe.get("name") == "yamnet" else "",
            "output=embedding" if meta.get("network") == "mobilenet_v1" else "")


def cnn_frontend(cnn):
    """The classifier's frontend: the CNN's log-mel settings, the CNN file's name and
    SHA-256, and cnn_output "embedding" where the tokens are its pooled embedding (what
    conytransformer checks against the token caps)."""
    meta = cnn_metadata(cnn)
    fe = json.loads(meta["frontend"]) if "frontend" in meta else {"kind": "audio-logmel-vggish"}
    fe.update(cnn=os.path.basename(cnn), cnn_sha256=sha256(cnn))
    if token_props(cnn)[1]:
        fe["cnn_output"] = "embedding"
    return fe


def classify_accuracy(cony, model_path, val_tokens, labels, n):
    """Per-step (full-window steps) and per-file accuracy of libcony on the validation files."""
    steps_ok = steps = files_ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path, (tokens, label) in val_tokens.items():
            src, out = os.path.join(tmp, "in.npy"), os.path.join(tmp, "out.npy")
            np.save(src, tokens)
            r = subprocess.run([cony, "classify", "--model", model_path, src, "-o", out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"train_your_own.py: cony classify failed on {path}: {r.stderr}")
            pred = np.load(out).argmax(1)
            full = pred[n - 1:] if len(pred) >= n else pred[-1:]
            steps_ok += int((full == labels.index(label)).sum())
            steps += len(full)
            votes = np.bincount(full, minlength=len(labels))
            files_ok += int(votes.argmax() == labels.index(label))
    return steps_ok / max(steps, 1), files_ok / max(len(val_tokens), 1), steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="folder with one sub-folder of media files per class")
    ap.add_argument("-o", "--output", required=True, help="model file (.safetensors)")
    ap.add_argument("--cnn", default=os.path.join(ROOT, "models", "yamnet", "yamnet.safetensors"),
                    help="front-end CNN (default: YAMNet, models/yamnet/yamnet.safetensors)")
    ap.add_argument("--cony", default=os.path.join(ROOT, "build", "tools", "cony"),
                    help="the cony tool, for the accuracy of the exported file")
    ap.add_argument("--window", type=int, default=0,
                    help="tokens of context (default: chosen from the files' lengths)")
    ap.add_argument("--val-fraction", type=float, default=0.25)
    ap.add_argument("--no-other", action="store_true",
                    help='no generated "other" class (speech, music, noise, hum, near-silence '
                         "that is none of your classes): the model then knows only your classes")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batches-per-epoch", type=int, default=0, help="default: windows / 32, at least 10")
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if not os.path.isfile(args.cnn):
        sys.exit(f"train_your_own.py: CNN file {args.cnn} not found (--cnn)")
    cony = args.cony if os.path.isfile(args.cony) else shutil.which("cony")
    if not cony:
        sys.exit(f"train_your_own.py: the cony tool ({args.cony}) not found: build first "
                 "(scripts/build.sh) or give --cony")

    import torch
    from conytrain.ref.model import ConyEncoderClassifier
    from conytrain.export import export_model
    from conytrain.train import WindowSampler, train_epochs
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    classes = find_files(args.data)
    embedder = Embedder(args.cnn)
    train_tokens, val_tokens = {}, {}
    embed_splits(embedder, split_by_file(classes, args.val_fraction, rng), train_tokens, val_tokens)
    if not train_tokens:
        sys.exit("train_your_own.py: no training file gave embeddings")
    E = next(iter(train_tokens.values()))[0].shape[1]

    lengths = [len(t) for t, _ in train_tokens.values()]
    n = choose_window(lengths, args.window)
    other_tmp = None
    if not args.no_other and OTHER not in {c.lower() for c in classes}:
        other_tmp = tempfile.TemporaryDirectory(prefix="train_your_own-other-")
        classes[OTHER] = other_files(classes, lengths, args.seed, other_tmp.name)
        embed_splits(embedder, split_by_file({OTHER: classes[OTHER]}, args.val_fraction, rng),
                     train_tokens, val_tokens)
    labels = list(classes)
    short = [p for p, (t, _) in train_tokens.items() if len(t) < n]
    short_val = [p for p, (t, _) in val_tokens.items() if len(t) < n]
    if short or short_val:
        names = [os.path.relpath(p, args.data) for p in short + short_val]
        warn(f"{len(names)} of {len(train_tokens) + len(val_tokens)} files are shorter than "
             f"the window of {n} tokens ({FIRST_TOKEN_SECONDS + (n - 1) * TOKEN_SECONDS:.2f} s "
             f"of audio): left out of training, validated on warm-up steps only: "
             f"{', '.join(names[:5])}" + (" ..." if len(names) > 5 else ""))
    hop = max(1, n // 4)
    x, y = [], []
    for t, label in train_tokens.values():
        w = windows_of(t, n, hop)
        x += w
        y += [labels.index(label)] * len(w)
    if not x:
        sys.exit(f"train_your_own.py: no training file is as long as the window of {n} tokens; "
                 "use longer clips or a smaller --window")
    missing = [lab for i, lab in enumerate(labels) if i not in y]
    if missing:
        sys.exit(f"train_your_own.py: no training window for {missing}: their files are "
                 f"shorter than the window of {n} tokens")
    x = np.stack(x).astype(np.float32)
    y = np.array(y)
    log(f"{len(labels)} classes {labels}; {E}-d embeddings; window n = {n} tokens "
        f"({FIRST_TOKEN_SECONDS + (n - 1) * TOKEN_SECONDS:.2f} s); {len(x)} training windows "
        f"from {len(train_tokens) - len(short)} files")

    landmarks = min(4, n)
    model = ConyEncoderClassifier(E, args.d, args.heads, args.ff, 1, n, landmarks, "cony",
                                  labels, positional_encoding="learned",
                                  frontend=cnn_frontend(args.cnn), dropout=0.1)
    sampler = WindowSampler(x, y, n, model.config["positional_rows"], 0.1, args.seed)
    bpe = args.batches_per_epoch or max(10, len(x) // 32)
    epoch = iter(range(1, args.epochs + 1))

    def epoch_log(msg):   # every 5th epoch and the last
        e = next(epoch)
        if e % 5 == 0 or e == args.epochs:
            log("  " + msg)

    train_epochs(model, sampler, args.epochs, bpe, 32, args.lr, 1e-4, log=epoch_log)
    model.eval()
    export_model(model, args.output)
    log(f"wrote {args.output} ({os.path.getsize(args.output)} bytes; CNN {os.path.basename(args.cnn)})")

    if val_tokens:
        step_acc, file_acc, steps = classify_accuracy(cony, args.output, val_tokens, labels, n)
        log(f"validation accuracy (libcony, {len(val_tokens)} held-out files): "
            f"{100 * step_acc:.1f} % of {steps} steps, {100 * file_acc:.1f} % of files")
    else:
        warn("no validation files (a class with one file, or --val-fraction 0): no accuracy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
