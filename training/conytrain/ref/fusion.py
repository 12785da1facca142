"""Fused models: one encoder-classifier over several token streams (docs/model-format.md,
"Fused models"; the C side is src/model/fusion.c + src/model/encoder.c, run by conyfuse !
conytransformer).

A fused step joins, per input in the order of the config's fusion.inputs, its token (or,
when the input is missing or stale, its learned absent token) and then one flag per input
(1 present, 0 absent):

    f = [ x_0 | x_1 | ... | flag_0 | flag_1 | ... ]          (d_in = sum of sizes + inputs)

and the step is the encoder-classifier of ref/model.py on f. Its input projection on the
concatenation is the sum of one projection per input (the column block of that input)
plus, per absent input, a learned bias (the flag column): the per-input projection, then
the encoder. The model file is the encoder's tensors plus fusion.<name>.absent (size,)
per input; the config is the encoder's plus the "fusion" object.

Optionally (fusion.gate, models/av/EXPERIMENTS.md rule 12) a confidence gate adds, after
the encoder, one input's own evidence to the logits z: a linear read-out of that input's
token v = A x + c, and per step

    p = softmax(z), q = softmax(v)
    phi = [max p, H(p) / ln C, max q, sum p q]            (H: entropy, C classes)
    g = sigmoid(w . phi + b)
    out = z + flag * s * g * log_softmax(v)

so with the gate closed (or the input absent or stale: flag 0) the output is the encoder's.
Tensors fusion.gate.readout.weight (C, size), fusion.gate.readout.bias (C),
fusion.gate.weight (4), fusion.gate.bias (1), fusion.gate.scale (1). With a "context"
input (rule 13) phi has a fifth feature, flag_ctx * sigmoid(u . x_ctx + e) (tensors
fusion.gate.context.weight (its size), fusion.gate.context.bias (1); weight then (5)).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import ConyEncoderClassifier


GATE_FEATURES = 4          # phi above


def fusion_config(inputs, rate, gate=None):
    """The config's "fusion" object: inputs = [{name, size, rate: [n, d], tolerance_ms,
    optional cnn, cnn_sha256, cnn_output, cnn_mode}], rate = [n, d] fused steps per second; gate:
    None or {"input": name[, "context": name]}, the input whose read-out the confidence
    gate adds and the one its fifth feature reads."""
    known = {"name", "size", "rate", "tolerance_ms", "cnn", "cnn_sha256", "cnn_output",
             "cnn_mode"}
    out = []
    for i in inputs:
        extra = set(i) - known
        if extra:
            raise ValueError(f"input {i.get('name')}: unknown keys {sorted(extra)}")
        out.append({k: (list(v) if k == "rate" else v) for k, v in i.items()})
    if len({i["name"] for i in out}) != len(out):
        raise ValueError("input names must be unique")
    fusion = {"rate": list(rate), "inputs": out}
    if gate is not None:
        names = {i["name"] for i in out}
        if (not {"input"} <= set(gate) <= {"input", "context"} or gate["input"] not in names
                or "context" in gate and gate["context"] not in names - {gate["input"]}):
            raise ValueError("gate must be {'input': an input[, 'context': another]}, "
                             f"not {gate!r}")
        fusion["gate"] = dict(gate)
    return fusion


class FusionGate(nn.Module):
    """The confidence gate (module docstring): adds s * g * log_softmax(A x + c) of one
    input to the encoder's logits, g from both sides' confidence."""

    def __init__(self, size, classes, context_size=None):
        super().__init__()
        self.readout_weight = nn.Parameter(torch.zeros(classes, size))
        self.readout_bias = nn.Parameter(torch.zeros(classes))
        if context_size:
            self.context_weight = nn.Parameter(torch.zeros(context_size))
            self.context_bias = nn.Parameter(torch.zeros(1))
        self.has_context = bool(context_size)
        self.weight = nn.Parameter(torch.zeros(GATE_FEATURES + self.has_context))
        self.bias = nn.Parameter(torch.full((1,), -20.0))   # closed until fitted
        self.scale = nn.Parameter(torch.ones(1))

    def features(self, z, lv, ctx=None):
        """phi (..., 4) of encoder logits z and read-out log-probabilities lv (..., C);
        (..., 5) with ctx (...), the context feature (context())."""
        lp = F.log_softmax(z, -1)
        p, q = lp.exp(), lv.exp()
        entropy = -(p * lp).sum(-1) / torch.log(torch.tensor(float(z.shape[-1]), dtype=z.dtype))
        phi = [p.amax(-1), entropy, q.amax(-1), (p * q).sum(-1)]
        return torch.stack(phi + ([ctx] if ctx is not None else []), -1)

    def context(self, xc, present):
        """The fifth feature: flag * sigmoid(u . x + e) of the context input's tokens."""
        u, e = self.context_weight.to(xc.dtype), self.context_bias.to(xc.dtype)
        return present.to(xc.dtype) * torch.sigmoid(xc @ u + e)

    def readout(self, x):
        return F.log_softmax(x @ self.readout_weight.to(x.dtype).T + self.readout_bias.to(x.dtype), -1)

    def forward(self, z, x, present, xc=None, pc=None):
        """Logits z (..., C), the input's tokens x (..., size), present (...) (and the
        context input's tokens xc and presence pc) -> logits."""
        lv = self.readout(x)
        ctx = self.context(xc.to(z.dtype), pc) if self.has_context else None
        g = torch.sigmoid(self.features(z, lv, ctx) @ self.weight.to(z.dtype) + self.bias.to(z.dtype))
        on = present.to(z.dtype) * self.scale.to(z.dtype) * g
        return z + on.unsqueeze(-1) * lv

    def closed(self):
        """Forces the gate shut (g = 0 to float precision): the encoder's logits."""
        with torch.no_grad():
            self.weight.zero_()
            self.bias.fill_(-1e4)


class FusedClassifier(nn.Module):
    """A ConyEncoderClassifier over fused tokens plus one learned absent token per input.
    `encoder_kwargs` are ConyEncoderClassifier's arguments after d_in."""

    def __init__(self, inputs, rate, gate=None, **encoder_kwargs):
        super().__init__()
        fusion = fusion_config(inputs, rate, gate)
        self.names = [i["name"] for i in fusion["inputs"]]
        self.sizes = [int(i["size"]) for i in fusion["inputs"]]
        d_in = sum(self.sizes) + len(self.sizes)
        self.encoder = ConyEncoderClassifier(d_in, **encoder_kwargs)
        self.encoder.config["fusion"] = fusion
        self.absent = nn.ParameterDict(
            {n: nn.Parameter(0.02 * torch.randn(s)) for n, s in zip(self.names, self.sizes)})
        self.gate_input = gate["input"] if gate else None
        self.gate_context = gate.get("context") if gate else None
        self.gate = (FusionGate(self.sizes[self.names.index(self.gate_input)],
                                len(self.encoder.config["labels"]),
                                self.sizes[self.names.index(self.gate_context)]
                                if self.gate_context else None) if gate else None)

    @property
    def config(self):
        return self.encoder.config

    def config_json(self):
        return self.encoder.config_json()

    def join(self, tokens, present):
        """tokens {name: (..., size)}, present {name: (...) bool} -> fused tokens
        (..., d_in): an absent input's token is replaced by its absent token."""
        parts, flags = [], []
        for n in self.names:
            x, p = tokens[n], present[n].to(torch.bool)
            a = self.absent[n].to(x.dtype).expand_as(x)
            parts.append(torch.where(p.unsqueeze(-1), x, a))
            flags.append(p.to(x.dtype).unsqueeze(-1))
        return torch.cat(parts + flags, dim=-1)

    def pack(self, tokens, present):
        """tokens {name: (..., size)}, present {name: (...)} -> packed tokens (..., d_in):
        the fused layout with the raw tokens (zeros where absent) and the flags, what
        forward_packed() takes (a plain array a WindowSampler can cut windows from)."""
        parts = [torch.where(present[n].to(torch.bool).unsqueeze(-1), tokens[n],
                             torch.zeros_like(tokens[n])) for n in self.names]
        flags = [present[n].to(tokens[n].dtype).unsqueeze(-1) for n in self.names]
        return torch.cat(parts + flags, dim=-1)

    def unpack(self, packed):
        """The inverse of pack(): ({name: tokens}, {name: present})."""
        tokens, present, at = {}, {}, 0
        flags = packed[..., sum(self.sizes):]
        for i, (n, size) in enumerate(zip(self.names, self.sizes)):
            tokens[n] = packed[..., at:at + size]
            present[n] = flags[..., i] > 0.5
            at += size
        return tokens, present

    def forward_packed(self, x, offsets=None, override=None):
        """forward() on packed windows x (B, w, d_in) (pack()): the flags say which
        tokens are absent."""
        tokens, present = self.unpack(x)
        return self.forward(tokens, present, offsets, override)

    def forward(self, tokens, present, offsets=None, override=None):
        """Windows: tokens {name: (B, w, size)}, present {name: (B, w)} -> logits (B, classes)
        (the gate, if any, on the window's newest step)."""
        z = self.encoder(self.join(tokens, present), offsets, override)
        if self.gate is None:
            return z
        n, c = self.gate_input, self.gate_context
        return self.gate(z, tokens[n][:, -1], present[n][:, -1],
                         *((tokens[c][:, -1], present[c][:, -1]) if c else ()))

    @torch.no_grad()
    def stream_logits(self, tokens, present, override=None):
        """Per-step logits of a stream: tokens {name: (L, size)}, present {name: (L,)}."""
        return self.fused_logits(self.join(tokens, present), override)

    @torch.no_grad()
    def fused_logits(self, fused, override=None):
        """Per-step logits of a stream of fused tokens (L, d_in), join()'s (or conyfuse's)
        layout: the encoder's, then the gate's, which reads the tokens and flags there."""
        z = self.encoder.stream_logits(fused, override)
        if self.gate is None:
            return z
        tokens, present = self.unpack(fused.to(z.dtype))
        n, c = self.gate_input, self.gate_context
        return self.gate(z, tokens[n], present[n], *((tokens[c], present[c]) if c else ()))

    def export_tensors(self):
        """{name: float32 numpy array} in the model-file layout: the encoder's tensors and
        fusion.<name>.absent."""
        out = self.encoder.export_tensors()
        for n in self.names:
            out[f"fusion.{n}.absent"] = self.absent[n].detach().to(torch.float32).cpu().numpy()
        if self.gate is not None:
            for k, t in self.gate.state_dict().items():
                key = k.replace("readout_", "readout.").replace("context_", "context.")
                out[f"fusion.gate.{key}"] = t.detach().to(torch.float32).cpu().numpy()
        return out

    @classmethod
    def from_file_parts(cls, tensors, config):
        """The model of an exported file's (tensors {name: array}, config dict)."""
        c = dict(config)
        fusion = c.pop("fusion")
        c.pop("architecture", None)
        c.pop("d_in")
        output = c.pop("output", None)
        model = cls(fusion["inputs"], fusion["rate"], fusion.get("gate"), **c)
        if output is not None:
            model.config["output"] = output
        state = {}
        for name, arr in tensors.items():
            if name.startswith("fusion.gate."):
                key = "gate." + name[len("fusion.gate."):].replace(
                    "readout.", "readout_").replace("context.", "context_")
            elif name.startswith("fusion."):
                key = f"absent.{name.split('.')[1]}"
            else:
                key = f"encoder.{name}"
            state[key] = torch.from_numpy(arr)
        for b, block in enumerate(model.encoder.blocks):
            if f"encoder.blocks.{b}.attn.q_landmarks" in state:
                block.attn.set_landmarks(state[f"encoder.blocks.{b}.attn.q_landmarks"],
                                         state[f"encoder.blocks.{b}.attn.k_landmarks"])
        model.load_state_dict(state)
        return model.eval()


def bounded_logits(z_primary, z_fused, limit, present):
    """Bounded influence (models/av/EXPERIMENTS.md, rule 15): the primary model's
    log-probabilities (e.g. the audio model's, on the sound alone) moved towards the fused
    model's by at most @limit nats per class, on the steps where the other inputs are
    @present ((L,) bool); elsewhere the primary's alone. z_* (L, C) logits."""
    lp, lf = F.log_softmax(z_primary, -1), F.log_softmax(z_fused, -1)
    moved = lp + torch.clamp(lf - lp, -limit, limit)
    return torch.where(present.unsqueeze(-1), moved, lp)


class BoundedFusion(nn.Module):
    """A fused model whose output may differ from a primary single-input model's by at
    most @limit nats per class (bounded_logits): with @primary the audio model, a
    picture can change one class's odds against another by at most e^(2 limit), so a
    clearly heard sound is never overridden. Steps with any other input absent take the
    primary's output. Exposes the FusedClassifier interface that evalset.grid and the
    twin's RefPath use (names, config, join, stream_logits)."""

    def __init__(self, primary, fused, limit):
        super().__init__()
        if list(primary.names) != list(fused.names[:1]) or len(primary.names) != 1:
            raise ValueError(f"the primary model must take only the fused model's first "
                             f"input ({fused.names[0]}), not {primary.names}")
        if not limit >= 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        self.primary, self.fused, self.limit = primary, fused, float(limit)
        self.names = fused.names

    @property
    def config(self):
        return self.fused.config

    def join(self, tokens, present):
        return self.fused.join(tokens, present)

    @torch.no_grad()
    def stream_logits(self, tokens, present, override=None):
        """Per-step bounded logits of a stream: tokens {name: (L, size)}, present {name: (L,)}."""
        first = self.names[0]
        zp = self.primary.stream_logits({first: tokens[first]}, {first: present[first]}, override)
        zf = self.fused.stream_logits(tokens, present, override)
        others = torch.stack([present[n].to(torch.bool) for n in self.names[1:]]).all(0)
        return bounded_logits(zp, zf, self.limit, others)
