"""The token cache of a YAMNet-shaped CNN, shared by train_yamnet_audio.py (audio/yamnet.py),
its CNN adaptation (audio/adapt.py) and the AudioSet tagger (audio/audioset_tagger.py):
one .npy of pooled embeddings per clip, CACHE/<set>/<clip>.npy, and CACHE/yamnet.json
naming the CNN they come from, so that tokens of another CNN are never mixed in."""

import json
import os

from conytrain import REPO
from conytrain.audio.own import sha256

STRIDE = 25          # frames between YAMNet windows: one token every 0.25 s


def token_path(cache, r, kind=""):
    """Clip r's tokens (kind "") or scores (".scores") in cache."""
    return os.path.join(cache, r["set"], os.path.splitext(r["path"])[0] + kind + ".npy")


def check_cache(cnn, cache, write=True, stride=STRIDE, mode="window"):
    """CACHE/yamnet.json names the CNN the cached tokens come from, their stride and the
    CNN's mode (window, or continual: docs/continual-cnn.md): written for CNN when missing
    (with write), and a cache of another CNN, stride or mode refused (a cache without a
    mode holds window tokens)."""
    info = os.path.join(cache, "yamnet.json")
    mine = {"cnn": os.path.relpath(cnn, REPO), "cnn_sha256": sha256(cnn),
            "stride_frames": stride, "tokens": "pooled embedding (cony embed -e)",
            "scores": "<clip>.scores.npy: sigmoid(fc(embedding)), float16"}
    if mode != "window":
        mine["cnn_mode"] = mode
    if os.path.exists(info):
        with open(info) as f:
            have = json.load(f)
        if have.get("cnn_sha256") != mine["cnn_sha256"]:
            raise RuntimeError(f"{info}: the cache holds tokens of another CNN "
                               f"({have.get('cnn')}, SHA-256 {have.get('cnn_sha256')}); "
                               "use another --cache")
        got = (have.get("stride_frames", STRIDE), have.get("cnn_mode", "window"))
        if got != (stride, mode):
            raise RuntimeError(f"{info}: the cache holds tokens of stride {got[0]}, mode "
                               f"{got[1]}, not {stride}, {mode}; use another --cache")
    elif write:
        os.makedirs(cache, exist_ok=True)
        with open(info, "w") as f:
            json.dump(mine, f, indent=1)
