"""A cross-fitted linear read-out of the video tokens (models/av/EXPERIMENTS.md, rule 7).

The fused model's video sense, trained on raw MobileNet embeddings, fits its training
photographs and is trusted more than it deserves on new ones. With --video-readout K the
encoder sees the video as the class scores of a linear read-out (multinomial logistic
regression on the standardised tokens); in training each photograph's scores come from a
read-out fitted on the other folds of photograph groups (out of fold), everywhere else
from the read-out fitted on the whole train split. After training the model is composed
back onto the 1280-d tokens (compose()), so the file, conyfuse and the C path are the
same as without a read-out.
"""

import numpy as np
import torch
import torch.nn.functional as F

from conytrain.av import sources

PENALTIES = (1e-3, 1e-2, 1e-1)   # L2 on the standardised weights, chosen out of fold
FOLD_SEED = 0


def fit(x, y, penalty):
    """(A (classes, D), c (classes,)) float64: scores A x + c of a logistic regression of
    labels @y (N,) on tokens @x (N, D), fitted on x standardised per feature."""
    x = torch.from_numpy(np.asarray(x, np.float64))
    mu, sd = x.mean(0), x.std(0) + 1e-6
    xs = (x - mu) / sd
    w = torch.zeros(len(sources.CLASSES), x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(len(sources.CLASSES), dtype=torch.float64, requires_grad=True)
    yt = torch.from_numpy(np.asarray(y)).long()
    opt = torch.optim.LBFGS([w, b], max_iter=300, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(xs @ w.T + b, yt) + 0.5 * penalty * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    a = (w / sd).detach()
    return a.numpy(), (b.detach() - a @ mu).numpy()


def labels_of(cls):
    return np.array([sources.CLASSES.index(str(c)) for c in cls])


def folds_of(groups, k):
    """Fold (0..k-1) of each shot: its photograph group's place in a fixed permutation."""
    names = sorted(set(str(g) for g in groups))
    perm = np.random.default_rng(FOLD_SEED).permutation(len(names))
    fold = {names[i]: j % k for j, i in enumerate(perm)}
    return np.array([fold[str(g)] for g in groups])


def scores(video, a, c, dtype=np.float32):
    """Scores of tokens @video (..., D) under a read-out (a, c), as @dtype."""
    return (np.asarray(video, np.float64) @ a.T + c).astype(dtype)


def out_of_fold(video, y, fold, k, penalty):
    """Each shot's scores (shots, steps, classes) from the read-out fitted without its fold."""
    out = np.zeros(video.shape[:2] + (len(sources.CLASSES),), np.float32)
    steps = video.shape[1]
    for f in range(k):
        train = fold != f
        a, c = fit(video[train].reshape(-1, video.shape[-1]), np.repeat(y[train], steps), penalty)
        out[~train] = scores(video[~train], a, c)
    return out


class Readout:
    """The read-out of a train split's video tokens: .a, .c (the full fit), .penalty (the
    one of @penalties with the best out-of-fold accuracy), .train_scores (out of fold,
    shots x steps x classes), .oof_accuracy."""

    def __init__(self, data, k, log, penalties=PENALTIES):
        video, y = data["video"], labels_of(data["video_cls"])
        fold = folds_of(data["video_group"], k)
        steps = video.shape[1]
        best = None
        for penalty in penalties:
            z = out_of_fold(video, y, fold, k, penalty)
            acc = float((z.argmax(-1) == y[:, None]).mean())
            log(f"video read-out: penalty {penalty:g}, out-of-fold step accuracy {100 * acc:.1f} %")
            if best is None or acc > best[0]:
                best = (acc, penalty, z)
        self.oof_accuracy, self.penalty, self.train_scores = best
        self.a, self.c = fit(video.reshape(-1, video.shape[-1]), np.repeat(y, steps), self.penalty)
        fit_acc = float((scores(video, self.a, self.c).argmax(-1) == y[:, None]).mean())
        log(f"video read-out: penalty {self.penalty:g} ({k} folds of {len(set(fold.tolist()))}"
            f" used); train accuracy of the full fit {100 * fit_acc:.1f} %, out of fold "
            f"{100 * self.oof_accuracy:.1f} %")

    def scores(self, video, dtype=np.float32):
        """The full fit's scores of tokens @video (..., D)."""
        return scores(video, self.a, self.c, dtype)

    def training_data(self, data):
        """@data (the train split) with its video tokens replaced by the out-of-fold scores."""
        out = dict(data)
        out["video"] = self.train_scores
        return out


@torch.no_grad()
def compose(small, big, readout):
    """Loads into @big (the same model with 1280-d video tokens) the composition of
    @small (trained on read-out scores) with the read-out: video columns W -> W a, the
    bias W c onto the video flag's column (added only when the video is present), the
    absent token -> the least-norm token whose scores are nearest small's absent token
    (the rest of its projection in the bias, taken off the flag's column)."""
    state = {k: v.clone() for k, v in small.state_dict().items()}
    w = state["encoder.input_proj.weight"].double()
    a = torch.from_numpy(readout.a)
    c = torch.from_numpy(readout.c)
    cols, at = [], 0
    for name, size in zip(small.names, small.sizes):
        part = w[:, at:at + size]
        cols.append(part @ a if name == "video" else part)
        at += size
    flags = w[:, at:].clone()
    bias = state["encoder.input_proj.bias"].double()
    for i, name in enumerate(small.names):
        if name != "video":
            continue
        wv = w[:, sum(small.sizes[:i]):sum(small.sizes[:i + 1])]
        # The scores span only a subspace (a softmax read-out's rows sum to zero), so the
        # absent token's scores are its least-squares token's plus a residual r; W r is
        # added to the bias and taken off the flag's column: it counts only when absent.
        absent = state["absent.video"].double()
        token = torch.linalg.lstsq(a, absent.unsqueeze(1), driver="gelsd").solution.squeeze(1)
        rest = wv @ (absent - a @ token)
        state["absent.video"] = token.float()
        bias += rest
        flags[:, i] += wv @ c - rest
    state["encoder.input_proj.weight"] = torch.cat(cols + [flags], 1).float()
    state["encoder.input_proj.bias"] = bias.float()
    for b, block in enumerate(big.encoder.blocks):
        q = state.get(f"encoder.blocks.{b}.attn.q_landmarks")
        if q is not None:
            block.attn.set_landmarks(q, state[f"encoder.blocks.{b}.attn.k_landmarks"])
    big.load_state_dict(state)
    return big.eval()

