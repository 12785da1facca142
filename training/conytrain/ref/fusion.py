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
"""

import torch
import torch.nn as nn

from .model import ConyEncoderClassifier


def fusion_config(inputs, rate):
    """The config's "fusion" object: inputs = [{name, size, rate: [n, d], tolerance_ms,
    optional cnn, cnn_sha256, cnn_output}], rate = [n, d] fused steps per second."""
    known = {"name", "size", "rate", "tolerance_ms", "cnn", "cnn_sha256", "cnn_output"}
    out = []
    for i in inputs:
        extra = set(i) - known
        if extra:
            raise ValueError(f"input {i.get('name')}: unknown keys {sorted(extra)}")
        out.append({k: (list(v) if k == "rate" else v) for k, v in i.items()})
    if len({i["name"] for i in out}) != len(out):
        raise ValueError("input names must be unique")
    return {"rate": list(rate), "inputs": out}


class FusedClassifier(nn.Module):
    """A ConyEncoderClassifier over fused tokens plus one learned absent token per input.
    `encoder_kwargs` are ConyEncoderClassifier's arguments after d_in."""

    def __init__(self, inputs, rate, **encoder_kwargs):
        super().__init__()
        fusion = fusion_config(inputs, rate)
        self.names = [i["name"] for i in fusion["inputs"]]
        self.sizes = [int(i["size"]) for i in fusion["inputs"]]
        d_in = sum(self.sizes) + len(self.sizes)
        self.encoder = ConyEncoderClassifier(d_in, **encoder_kwargs)
        self.encoder.config["fusion"] = fusion
        self.absent = nn.ParameterDict(
            {n: nn.Parameter(0.02 * torch.randn(s)) for n, s in zip(self.names, self.sizes)})

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
        """Windows: tokens {name: (B, w, size)}, present {name: (B, w)} -> logits (B, classes)."""
        return self.encoder(self.join(tokens, present), offsets, override)

    @torch.no_grad()
    def stream_logits(self, tokens, present, override=None):
        """Per-step logits of a stream: tokens {name: (L, size)}, present {name: (L,)}."""
        return self.encoder.stream_logits(self.join(tokens, present), override)

    def export_tensors(self):
        """{name: float32 numpy array} in the model-file layout: the encoder's tensors and
        fusion.<name>.absent."""
        out = self.encoder.export_tensors()
        for n in self.names:
            out[f"fusion.{n}.absent"] = self.absent[n].detach().to(torch.float32).cpu().numpy()
        return out

    @classmethod
    def from_file_parts(cls, tensors, config):
        """The model of an exported file's (tensors {name: array}, config dict)."""
        c = dict(config)
        fusion = c.pop("fusion")
        c.pop("architecture", None)
        c.pop("d_in")
        output = c.pop("output", None)
        model = cls(fusion["inputs"], fusion["rate"], **c)
        if output is not None:
            model.config["output"] = output
        state = {}
        for name, arr in tensors.items():
            key = f"absent.{name.split('.')[1]}" if name.startswith("fusion.") else f"encoder.{name}"
            state[key] = torch.from_numpy(arr)
        for b, block in enumerate(model.encoder.blocks):
            if f"encoder.blocks.{b}.attn.q_landmarks" in state:
                block.attn.set_landmarks(state[f"encoder.blocks.{b}.attn.q_landmarks"],
                                         state[f"encoder.blocks.{b}.attn.k_landmarks"])
        model.load_state_dict(state)
        return model.eval()
