"""The encoder-classifier of docs/model-format.md, computed non-continually over windows.

This is the training model and the definition the C runtime (src/model/encoder.c) is checked
against. For a window of tokens x_s .. x_t (oldest first, s = max(0, t - n + 1) in a
stream) it returns the logits of the newest token x_t:

    u_i = W_in x_i + b_in + P[i mod T]           (recycling positional encoding: row =
                                                  the token's stream index mod T)
    1 block : a = MHA(u)[newest]; y = LN1(u_t + a); z = LN2(y + FF(y))
    2 blocks: A = MHA_1(u) (one row per window token); Y = LN1(U + A);
              Z = LN2(Y + FF(Y)) row by row; then block 2 on the rows Z:
              a = MHA_2(Z)[newest]; y = LN1'(Z_t + a); z = LN2'(y + FF'(y))
    logits = classifier(LN(z))

Multi-token steps (config tokens_per_step = k > 1, paper IV-C: e.g. the patches of one
video frame): a step brings k tokens, the window ends with them and the newest k rows
are output: the attention gives one row per new query (each against the whole window),
every row goes through its block's residual/LN/FF (2 blocks: block 2's rows of the k
newest tokens), then the final LN; the k rows are averaged and classified:
logits = classifier(mean_i LN(z_i)). k = 1 is the single-row model above.

MHA is ref.attention.mha_window (windowed form of each variant: continual ->
regular, cony -> nystrom, cony-fixed -> nystrom-fixed). The tensor names of
state_dict() are exactly the names of the model file.
"""

import json
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import VARIANTS, WINDOWED, cony_held_segments, mha_window, project

ARCHITECTURE = "cony-encoder-classifier"
LN_EPS = 1e-5


def cyclic_table(rows, d):
    """The fixed cyclic positional table (rows, d): column pairs (2k, 2k+1) hold
    sin/cos(2 pi f_k p / rows) of the row index p with integer frequencies f_k spread
    geometrically over 1 .. rows/2, so the table is exactly periodic in p with period
    `rows` (row rows-1 is next to row 0) — what a recycled index needs."""
    half = (d + 1) // 2
    hi = max(1.0, rows / 2.0)
    freqs = np.unique(np.round(np.geomspace(1.0, hi, half)).astype(np.int64))
    while len(freqs) < half:      # pad with repeated low frequencies at shifted phase
        freqs = np.concatenate([freqs, freqs[: half - len(freqs)]])
    p = np.arange(rows, dtype=np.float64)[:, None]
    ang = 2 * math.pi * freqs[None, :half] * p / rows
    table = np.zeros((rows, d), dtype=np.float64)
    table[:, 0::2] = np.sin(ang)[:, : (d + 1) // 2]
    table[:, 1::2] = np.cos(ang)[:, : d // 2]
    return table


def default_positional_rows(window, k=1):
    """T when the config gives none: the smallest multiple of k that is >= 2n - 1 (so a
    token's place inside its step, s mod k, is the same for every step; libcony uses the
    same default)."""
    return -(-(2 * window - 1) // k) * k


class Attention(nn.Module):
    """Projection weights in nn.MultiheadAttention layout, plus optional fixed landmarks
    (H, m, hd) kept as buffers (they are not trained)."""

    def __init__(self, d):
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = nn.Linear(d, d)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)
        self.register_buffer("q_landmarks", None)
        self.register_buffer("k_landmarks", None)

    def weights(self):
        return {"in_proj_weight": self.in_proj_weight, "in_proj_bias": self.in_proj_bias,
                "out_proj.weight": self.out_proj.weight, "out_proj.bias": self.out_proj.bias}

    def set_landmarks(self, q_landmarks, k_landmarks):
        p = self.in_proj_weight
        self.q_landmarks = torch.as_tensor(q_landmarks, dtype=p.dtype, device=p.device).clone()
        self.k_landmarks = torch.as_tensor(k_landmarks, dtype=p.dtype, device=p.device).clone()


class Block(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.attn = Attention(d)
        self.norm1 = nn.LayerNorm(d, eps=LN_EPS)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))
        self.norm2 = nn.LayerNorm(d, eps=LN_EPS)

    def tail(self, x, a, dropout=0.0):
        """Post-LN residual + feed-forward on rows: x, a (..., d)."""
        y = self.norm1(x + F.dropout(a, dropout, self.training))
        h = F.dropout(self.ff[1](self.ff[0](y)), dropout, self.training)
        return self.norm2(y + F.dropout(self.ff[2](h), dropout, self.training))


class ConyEncoderClassifier(nn.Module):
    def __init__(self, d_in, d, heads, ff, blocks, window, landmarks, attention, labels,
                 pinv="exact", pinv_iterations=6, positional_encoding="learned",
                 positional_rows=None, frontend=None, dropout=0.0, tokens_per_step=1):
        super().__init__()
        if blocks not in (1, 2):
            raise ValueError("blocks must be 1 or 2")
        k = int(tokens_per_step)
        if k < 1 or k > window:
            raise ValueError(f"tokens_per_step = {k}: expected 1 .. window = {window}")
        if isinstance(attention, str):
            attention = [attention] * blocks
        if len(attention) != blocks or any(a not in VARIANTS for a in attention):
            raise ValueError(f"attention: one of {VARIANTS} per block, got {attention}")
        self.config = dict(architecture=ARCHITECTURE, d_in=d_in, d=d, heads=heads, ff=ff,
                           blocks=blocks, window=window, landmarks=landmarks,
                           attention=list(attention), pinv=pinv,
                           pinv_iterations=pinv_iterations,
                           positional_encoding=positional_encoding,
                           positional_rows=positional_rows or default_positional_rows(window, k),
                           labels=list(labels))
        if k != 1:   # written only when it matters: k = 1 files stay as they were
            self.config["tokens_per_step"] = k
        if frontend is not None:
            self.config["frontend"] = frontend
        self.dropout = dropout
        T = self.config["positional_rows"]
        self.input_proj = nn.Linear(d_in, d)
        if positional_encoding == "learned":
            self.pos_embedding = nn.Parameter(0.02 * torch.randn(T, d))
        elif positional_encoding == "cyclic":
            self.register_buffer("pos_embedding",
                                 torch.tensor(cyclic_table(T, d), dtype=torch.float32))
        else:
            raise ValueError("positional_encoding: 'learned' or 'cyclic'")
        self.blocks = nn.ModuleList([Block(d, ff) for _ in range(blocks)])
        self.norm = nn.LayerNorm(d, eps=LN_EPS)
        self.classifier = nn.Linear(d, len(labels))

    # ------------------------------------------------------------------ helpers
    @classmethod
    def from_config(cls, config, dropout=0.0):
        c = dict(config)
        c.pop("architecture", None)
        output = c.pop("output", None)   # how the elements score the logits; no weights
        model = cls(dropout=dropout, **c)
        if output is not None:
            model.config["output"] = output
        return model

    def config_json(self):
        return json.dumps(self.config, separators=(",", ":"))

    def variant(self, b, override=None):
        return override if override is not None else self.config["attention"][b]

    @property
    def tokens_per_step(self):
        return self.config.get("tokens_per_step", 1)

    def _mha(self, b, x, retroactive, override=None, kernel_landmarks=None, queries=1):
        c = self.config
        blk = self.blocks[b].attn
        v = self.variant(b, override)
        if c["blocks"] == 2 and b == 1:
            v = WINDOWED[v]
        return mha_window(x, blk.weights(), v, c["heads"], landmarks=c["landmarks"],
                          retroactive=retroactive, pinv=c["pinv"],
                          pinv_iterations=c["pinv_iterations"],
                          q_landmarks=blk.q_landmarks, k_landmarks=blk.k_landmarks,
                          kernel_landmarks=kernel_landmarks, queries=queries)

    def embed(self, x, offsets):
        """x (B, w, d_in), offsets (B,) stream index of x[:, 0] -> block-1 inputs (B, w, d)."""
        T = self.config["positional_rows"]
        w = x.shape[1]
        idx = (offsets.view(-1, 1) + torch.arange(w, device=x.device).view(1, -1)) % T
        return self.input_proj(x) + self.pos_embedding[idx]

    def block_inputs(self, x, offsets, block, override=None):
        """The rows fed to block `block`'s attention for windows x: (B, w, d)."""
        u = self.embed(x, offsets)
        if block == 0:
            return u
        a = self._mha(0, u, True, override)
        return self.blocks[0].tail(u, a, self.dropout)

    # ------------------------------------------------------------------ forward
    def forward(self, x, offsets=None, override=None, kernel_landmarks=None):
        """x (B, w, d_in) windows (1 <= w <= n), offsets (B,) their stream start indices
        (long). Returns the newest token's logits (B, classes); with tokens_per_step k > 1
        the window ends with a step's k tokens (k <= w) and the logits are those of the
        mean of the k newest rows after the final LN. kernel_landmarks: optional held
        `cony` landmarks (q~, k~) (B, H, m', hd) for block 1 (the stepped schedule)."""
        if offsets is None:
            offsets = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        k = self.tokens_per_step
        u = self.embed(x, offsets)
        if k == 1:
            if self.config["blocks"] == 1:
                a = self._mha(0, u, False, override, kernel_landmarks)
                z = self.blocks[0].tail(u[:, -1], a, self.dropout)
            else:
                a = self._mha(0, u, True, override, kernel_landmarks)
                rows = self.blocks[0].tail(u, a, self.dropout)
                a2 = self._mha(1, rows, False, override)
                z = self.blocks[1].tail(rows[:, -1], a2, self.dropout)
            return self.classifier(self.norm(z))
        if x.shape[1] < k:
            raise ValueError(f"window of {x.shape[1]} tokens: a step needs k = {k}")
        if self.config["blocks"] == 1:
            a = self._mha(0, u, False, override, kernel_landmarks, queries=k)   # (B, k, d)
            z = self.blocks[0].tail(u[:, -k:], a, self.dropout)
        else:
            a = self._mha(0, u, True, override, kernel_landmarks)
            rows = self.blocks[0].tail(u, a, self.dropout)
            a2 = self._mha(1, rows, False, override, queries=k)
            z = self.blocks[1].tail(rows[:, -k:], a2, self.dropout)
        return self.classifier(self.norm(z).mean(dim=1))

    @torch.no_grad()
    def stream_logits(self, tokens, override=None):
        """What the stepped (continual) model outputs at every step of a stream
        tokens (L, d_in): (L / k, classes) (k = tokens_per_step; L a multiple of k). The
        step ending with token t (t = k-1, 2k-1, ...) sees the window of tokens
        max(0,t-n+1)..t with their stream positions. For `cony` in block 1 the landmarks are the
        schedule's held segments (docs/attention.md), which may reach before the window;
        every other variant is a function of the window alone."""
        c = self.config
        n, m, H = c["window"], c["landmarks"], c["heads"]
        L = tokens.shape[0]
        k = self.tokens_per_step
        if L % k:
            raise ValueError(f"{L} tokens is not a whole number of {k}-token steps")
        v0 = self.variant(0, override)
        if v0 == "cony":
            u_all = self.embed(tokens.unsqueeze(0), torch.zeros(1, dtype=torch.long))[0]
            qa, ka, _ = project(u_all, self.blocks[0].attn.weights(), H)   # (H, L, hd)
        out = []
        for t in range(k - 1, L, k):
            lo = max(0, t - n + 1)
            kl = None
            if v0 == "cony":
                held = cony_held_segments(t, n, m)
                ql = torch.stack([qa[:, s:s + z].mean(dim=1) for s, z in held], dim=1)
                kk = torch.stack([ka[:, s:s + z].mean(dim=1) for s, z in held], dim=1)
                kl = (ql.unsqueeze(0), kk.unsqueeze(0))
            off = torch.tensor([lo], dtype=torch.long)
            out.append(self.forward(tokens[lo:t + 1].unsqueeze(0), off, override, kl)[0])
        return torch.stack(out)

    # ------------------------------------------------------------------ export
    def export_tensors(self):
        """{name: float32 numpy array} in the model-file layout (docs/model-format.md)."""
        out = {}
        for name, t in self.state_dict().items():
            if t is None:
                continue
            out[name] = t.detach().to(torch.float32).cpu().numpy()
        return out


def save_checkpoint(model, path, extra=None):
    torch.save({"config": model.config, "state_dict": model.state_dict(),
                "extra": extra or {}}, path)


def load_checkpoint(path):
    ck = torch.load(path, map_location="cpu")
    model = ConyEncoderClassifier.from_config(ck["config"])
    sd = ck["state_dict"]
    for b in range(model.config["blocks"]):
        q = sd.get(f"blocks.{b}.attn.q_landmarks")
        k = sd.get(f"blocks.{b}.attn.k_landmarks")
        if q is not None and k is not None:
            model.blocks[b].attn.set_landmarks(q, k)
    model.load_state_dict(sd)
    return model
