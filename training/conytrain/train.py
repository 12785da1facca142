#!/usr/bin/python3
"""Trains the encoder-classifier (conytrain/ref/model.py) on token sequences.

    /usr/bin/python3 training/train.py --tokens X.npy --labels Y.npy -o model.pt \\
        [--val-tokens XV.npy --val-labels YV.npy] [--blocks 1] [--attention cony] \\
        [--fixed-landmarks --finetune-epochs 5] [--labels-names a,b,c] ...
    /usr/bin/python3 training/export.py model.pt -o model.safetensors

Data: X float32 (N, L, d_in) token sequences, Y int (N,) one label per sequence or
(N, L) one per token. Each training example is a window of the stream as the stepped
model sees it: a full window of n tokens ending anywhere in a sequence, placed at a
random stream offset (so every positional row is trained, Continual Transformers
§3.7), or, with probability --warmup-fraction, a warm-up window (the first w < n tokens
of a sequence at stream offset 0). The loss is cross-entropy on the newest token's
logits; the optimiser AdamW.

--fixed-landmarks runs the CoNy paper's IV-B procedure after the main training: for each
block in turn, k-means (k = m, written here in numpy) on the projected queries and keys
of the block's inputs over training windows, per head, gives q_landmarks / k_landmarks;
the block switches to cony-fixed and the whole model is fine-tuned with those landmarks
held fixed (buffers, not parameters) for --finetune-epochs.
"""

import argparse
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.ref.attention import VARIANTS, project
from conytrain.ref.model import ConyEncoderClassifier, save_checkpoint


# ----------------------------------------------------------------------------- data

class WindowSampler:
    """Training windows as the stepped model sees them. With tokens_per_step k > 1 a
    sequence is a run of k-token steps (L a multiple of k, e.g. the patches of L / k
    frames): a window always ends with a whole step, its stream offset s0 satisfies
    (s0 + w) mod k = 0 (the window's tokens keep their place in their step), warm-up
    windows hold whole steps, and the label is that of the window's last token."""

    def __init__(self, tokens, labels, window, positional_rows, warmup_fraction=0.1, seed=0,
                 tokens_per_step=1):
        tokens = np.asarray(tokens, dtype=np.float32)
        if tokens.ndim != 3:
            raise ValueError(f"tokens: expected (N, L, d_in), got {tokens.shape}")
        labels = np.asarray(labels).astype(np.int64)
        if labels.shape not in ((tokens.shape[0],), tokens.shape[:2]):
            raise ValueError(f"labels: expected ({tokens.shape[0]},) or {tokens.shape[:2]}, "
                             f"got {labels.shape}")
        self.x, self.y = tokens, labels
        self.n, self.T = window, positional_rows
        self.warm = warmup_fraction
        self.rng = np.random.default_rng(seed)
        self.k = int(tokens_per_step)
        if self.k > 1 and (tokens.shape[1] % self.k or tokens.shape[1] < window):
            raise ValueError(f"tokens: sequences of {tokens.shape[1]} tokens are not whole "
                             f"{self.k}-token steps covering a window of {window}")

    def label(self, i, t):
        return self.y[i] if self.y.ndim == 1 else self.y[i, t]

    def batch(self, size):
        """A batch of equal-length windows: (x (B, w, d_in), offsets (B,), y (B,))."""
        if self.k > 1:
            return self._batch_steps(size)
        N, L, _ = self.x.shape
        n = self.n
        warm = L < n or (n > 1 and self.rng.random() < self.warm)
        if warm:
            w = int(self.rng.integers(1, min(n - 1, L) + 1)) if n > 1 else 1
        else:
            w = n
        idx = self.rng.integers(0, N, size)
        xs, offs, ys = [], [], []
        for i in idx:
            if warm:   # the first w tokens of a stream: stream offset 0
                t0 = 0
                off = 0
            else:
                t0 = int(self.rng.integers(0, L - n + 1))
                off = int(self.rng.integers(0, self.T))
            xs.append(self.x[i, t0:t0 + w])
            offs.append(off)
            ys.append(self.label(i, t0 + w - 1))
        return (torch.from_numpy(np.stack(xs)), torch.tensor(offs, dtype=torch.long),
                torch.tensor(ys, dtype=torch.long))


    def _batch_steps(self, size):
        N, L, _ = self.x.shape
        n, k = self.n, self.k
        warm_steps = (n - 1) // k            # warm-up windows of 1 .. warm_steps whole steps
        warm = warm_steps >= 1 and self.rng.random() < self.warm
        w = k * int(self.rng.integers(1, warm_steps + 1)) if warm else n
        idx = self.rng.integers(0, N, size)
        xs, offs, ys = [], [], []
        for i in idx:
            if warm:
                t0, off = 0, 0
            else:   # the window ends with a whole step: end e in k, 2k, ... (e >= n)
                e = k * int(self.rng.integers(-(-n // k), L // k + 1))
                t0 = e - n
                off = k * int(self.rng.integers(0, max(1, self.T // k))) + (-n) % k
            xs.append(self.x[i, t0:t0 + w])
            offs.append(off)
            ys.append(self.label(i, t0 + w - 1))
        return (torch.from_numpy(np.stack(xs)), torch.tensor(offs, dtype=torch.long),
                torch.tensor(ys, dtype=torch.long))


class CorruptedWindows:
    """Wraps a WindowSampler: in every training window each token is, with probability p,
    replaced by a token drawn from any train clip (any class), and the window keeps its
    label. The CNN gets its own train clips nearly all right, so clean train tokens teach
    the encoder to trust the newest token; on unseen recordings single tokens are often
    wrong, and the window has to outvote them."""

    def __init__(self, sampler, pool, p, seed):
        self.sampler, self.pool, self.p = sampler, pool, p
        self.rng = np.random.default_rng([seed, 5])

    def batch(self, size):
        x, off, y = self.sampler.batch(size)
        if self.p > 0:
            hit = self.rng.random(x.shape[:2]) < self.p
            k = int(hit.sum())
            if k:
                x = x.clone()
                x[torch.from_numpy(hit)] = torch.from_numpy(
                    self.pool[self.rng.integers(0, len(self.pool), k)])
        return x, off, y


# ----------------------------------------------------------------------------- k-means

def kmeans(x, k, iterations=50, restarts=3, seed=0):
    """k-means with k-means++ seeding, Lloyd iterations; the best of `restarts` runs by
    inertia. x (P, D) -> centres (k, D)."""
    x = np.asarray(x, dtype=np.float64)
    P = x.shape[0]
    if P < k:
        raise ValueError(f"k-means: {P} points for {k} clusters")
    rng = np.random.default_rng(seed)
    best, best_inertia = None, math.inf
    for _ in range(restarts):
        c = np.empty((k, x.shape[1]))
        c[0] = x[rng.integers(P)]
        d2 = ((x - c[0]) ** 2).sum(1)
        for j in range(1, k):
            p = d2 / d2.sum() if d2.sum() > 0 else np.full(P, 1.0 / P)
            c[j] = x[rng.choice(P, p=p)]
            d2 = np.minimum(d2, ((x - c[j]) ** 2).sum(1))
        for _ in range(iterations):
            dist = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)      # (P, k)
            a = dist.argmin(1)
            new = c.copy()
            for j in range(k):
                members = x[a == j]
                if len(members):
                    new[j] = members.mean(0)
                else:   # empty cluster: move it to the point farthest from its centre
                    new[j] = x[dist[np.arange(P), a].argmax()]
            if np.allclose(new, c):
                c = new
                break
            c = new
        inertia = ((x[:, None, :] - c[None]) ** 2).sum(-1).min(1).sum()
        if inertia < best_inertia:
            best, best_inertia = c, inertia
    return best


@torch.no_grad()
def fit_block_landmarks(model, sampler, block, windows=256, max_points=20000, seed=0):
    """k-means on the projected q and k (per head) of block `block`'s inputs over
    training windows; sets the block's fixed landmarks."""
    model.eval()
    c = model.config
    H, m = c["heads"], c["landmarks"]
    qs, ks = [], []
    got = 0
    while got < windows:
        x, off, _ = sampler.batch(min(64, windows - got))
        rows = model.block_inputs(x, off, block)
        q, k, _ = project(rows, model.blocks[block].attn.weights(), H)   # (B, H, w, hd)
        qs.append(q.transpose(0, 1).reshape(H, -1, q.shape[-1]))
        ks.append(k.transpose(0, 1).reshape(H, -1, k.shape[-1]))
        got += x.shape[0]
    q = torch.cat(qs, 1).numpy()
    k = torch.cat(ks, 1).numpy()
    rng = np.random.default_rng(seed)
    if q.shape[1] > max_points:
        pick = rng.choice(q.shape[1], max_points, replace=False)
        q, k = q[:, pick], k[:, pick]
    ql = np.stack([kmeans(q[h], m, seed=seed + h) for h in range(H)])
    kl = np.stack([kmeans(k[h], m, seed=seed + 1000 + h) for h in range(H)])
    model.blocks[block].attn.set_landmarks(torch.tensor(ql, dtype=torch.float32),
                                           torch.tensor(kl, dtype=torch.float32))
    model.config["attention"][block] = "cony-fixed"


# ----------------------------------------------------------------------------- training

def train_epochs(model, sampler, epochs, batches_per_epoch, batch_size, lr, weight_decay,
                 val=None, log=print, lr_final=None, label_smoothing=0.0, grad_clip=None):
    """AdamW at lr; with lr_final, the rate falls from lr to lr_final along a half cosine
    over the batches of all epochs; label_smoothing as F.cross_entropy's. With grad_clip,
    each step's gradient is scaled down to that global L2 norm when it is longer."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                            weight_decay=weight_decay)
    steps, step = epochs * batches_per_epoch, 0
    for epoch in range(epochs):
        model.train()
        t0 = time.time()
        total, correct, loss_sum = 0, 0, 0.0
        for _ in range(batches_per_epoch):
            if lr_final is not None:
                for g in opt.param_groups:
                    g["lr"] = lr_final + 0.5 * (lr - lr_final) * (1 + math.cos(math.pi * step / steps))
                step += 1
            x, off, y = sampler.batch(batch_size)
            logits = model(x, off)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
            opt.zero_grad()
            loss.backward()
            if grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            total += len(y)
        msg = (f"epoch {epoch + 1}/{epochs} [{','.join(model.config['attention'])}]: "
               f"loss {loss_sum / total:.4f} train acc {correct / total:.3f}")
        if val is not None:
            msg += f" val acc {evaluate(model, val):.3f}"
        log(msg + f" ({time.time() - t0:.1f} s)")


@torch.no_grad()
def evaluate(model, sampler, batches=20, batch_size=64):
    model.eval()
    correct = total = 0
    for _ in range(batches):
        x, off, y = sampler.batch(batch_size)
        correct += (model(x, off).argmax(1) == y).sum().item()
        total += len(y)
    return correct / max(total, 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--val-tokens")
    ap.add_argument("--val-labels")
    ap.add_argument("-o", "--output", required=True, help="checkpoint (.pt) for export.py")
    ap.add_argument("--label-names", help="comma-separated class names (default class0..)")
    ap.add_argument("--d", type=int, default=192)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ff", type=int, default=384)
    ap.add_argument("--blocks", type=int, default=1, choices=(1, 2))
    ap.add_argument("--window", type=int, default=120)
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--attention", default="cony", choices=VARIANTS)
    ap.add_argument("--pinv", default="exact", choices=("exact", "iterative"))
    ap.add_argument("--pinv-iterations", type=int, default=6)
    ap.add_argument("--positional", default="learned", choices=("learned", "cyclic"))
    ap.add_argument("--positional-rows", type=int,
                    help="T (default: the smallest multiple of k >= 2n-1)")
    ap.add_argument("--tokens-per-step", type=int, default=1,
                    help="k tokens enter the window per step (e.g. the patches of one frame); "
                         "sequences are whole steps, one result per step")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batches-per-epoch", type=int, default=0, help="default N / batch")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--warmup-fraction", type=float, default=0.1)
    ap.add_argument("--fixed-landmarks", action="store_true",
                    help="after training, fit fixed landmarks by k-means block by block "
                         "and fine-tune (CoNy paper IV-B)")
    ap.add_argument("--finetune-epochs", type=int, default=5)
    ap.add_argument("--kmeans-windows", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x = np.load(args.tokens)
    y = np.load(args.labels)
    classes = int(y.max()) + 1
    names = args.label_names.split(",") if args.label_names else [f"class{i}" for i in range(classes)]
    if len(names) < classes:
        ap.error(f"--label-names lists {len(names)} names for {classes} classes")
    model = ConyEncoderClassifier(x.shape[2], args.d, args.heads, args.ff, args.blocks,
                                  args.window, args.landmarks, args.attention, names,
                                  pinv=args.pinv, pinv_iterations=args.pinv_iterations,
                                  positional_encoding=args.positional,
                                  positional_rows=args.positional_rows, dropout=args.dropout,
                                  tokens_per_step=args.tokens_per_step)
    T = model.config["positional_rows"]
    sampler = WindowSampler(x, y, args.window, T, args.warmup_fraction, args.seed,
                            args.tokens_per_step)
    val = None
    if args.val_tokens:
        val = WindowSampler(np.load(args.val_tokens), np.load(args.val_labels), args.window, T,
                            0.0, args.seed + 1, args.tokens_per_step)
    bpe = args.batches_per_epoch or max(1, math.ceil(len(x) / args.batch))
    train_epochs(model, sampler, args.epochs, bpe, args.batch, args.lr, args.weight_decay, val)
    if args.fixed_landmarks:
        for b in range(args.blocks):
            fit_block_landmarks(model, sampler, b, args.kmeans_windows, seed=args.seed)
            print(f"block {b}: fixed landmarks fitted by k-means (m = {args.landmarks}, "
                  f"{args.heads} heads); fine-tuning")
            train_epochs(model, sampler, args.finetune_epochs, bpe, args.batch, args.lr,
                         args.weight_decay, val)
    model.eval()
    save_checkpoint(model, args.output, {"args": vars(args)})
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()


def distill_epochs(model, sampler, epochs, batches, batch, lr, weight_decay, loss_fn, log,
                   loss_name="loss", teacher="the target's", clip=1.0):
    """AdamW on loss_fn(logits, soft targets) over sampler.batch(batch) windows, the
    learning rate decaying from lr to 0 along a cosine and gradients clipped to norm
    `clip`; log()s each epoch's mean loss and top-1 agreement with the targets. The
    distilled taggers (audio/audioset_tagger.py, video/tagger.py) train with it."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                            weight_decay=weight_decay)
    steps, step = epochs * batches, 0
    for epoch in range(epochs):
        model.train()
        t0, loss_sum, agree, total = time.time(), 0.0, 0, 0
        for _ in range(batches):
            for g in opt.param_groups:
                g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
            step += 1
            x, off, y = sampler.batch(batch)
            logits = model(x, off)
            loss = loss_fn(logits, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            loss_sum += loss.item() * len(y)
            agree += (logits.argmax(1) == y.argmax(1)).sum().item()
            total += len(y)
        log(f"epoch {epoch + 1}/{epochs} [{','.join(model.config['attention'])}]: "
            f"{loss_name} {loss_sum / total:.5f}, top-1 = {teacher} {agree / total:.3f} "
            f"({time.time() - t0:.0f} s)")


def train_then_fix_landmarks(model, sampler, args, epochs_fn, log):
    """The distilled taggers' schedule: args.epochs as `cony`, then k-means landmarks
    (fit_block_landmarks on args.kmeans_windows windows) and args.finetune_epochs as
    `cony-fixed` at 0.3 x args.lr; epochs_fn(model, sampler, epochs, batches, batch, lr,
    weight_decay) trains. Leaves the model in eval mode."""
    epochs_fn(model, sampler, args.epochs, args.batches, args.batch, args.lr,
              args.weight_decay)
    fit_block_landmarks(model, sampler, 0, args.kmeans_windows, seed=args.train_seed)
    log(f"fixed landmarks by k-means (m = {args.landmarks}); fine-tuning as cony-fixed")
    epochs_fn(model, sampler, args.finetune_epochs, args.batches, args.batch, args.lr * 0.3,
              args.weight_decay)
    model.eval()
