"""train_yamnet_audio's embed stage (conytrain/audio/yamnet.py stage_embed): clips go
through `cony embed --list` in chunks, and each cached token file is what `cony embed`
gives for that clip alone, its scores YAMNet's head on them; a second run finds every
clip cached and runs nothing."""

import argparse
import os
import subprocess
import tempfile
import unittest
import wave
from unittest import mock

import numpy as np

from conytrain import REPO
from conytrain.audio import yamnet
from conytrain.audio.token_cache import STRIDE, token_path

YAMNET = os.path.join(REPO, "models", "yamnet", "yamnet.safetensors")


def cony_tool():
    root = os.environ.get("CONY_BUILD_ROOT", os.path.join(REPO, "build"))
    path = os.path.join(root, "tools", "cony")
    return path if os.access(path, os.X_OK) else None


def write_clip(path, seconds, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    x = 0.2 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t) + 0.05 * rng.standard_normal(t.size)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())


@unittest.skipIf(cony_tool() is None, "no built cony (CONY_BUILD_ROOT)")
class EmbedStageTest(unittest.TestCase):
    def test_chunks_equal_one_clip_at_a_time(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "clips")
            rows = []
            for k in range(5):
                sub = os.path.join("s", f"c{k}.wav")
                os.makedirs(os.path.join(root, "s"), exist_ok=True)
                write_clip(os.path.join(root, sub), 1.5 + 0.5 * k, k)
                rows.append({"root": root, "path": sub, "set": "a" if k < 3 else "b"})
            args = argparse.Namespace(cony=cony_tool(), cnn=YAMNET, cache=os.path.join(tmp, "cache"),
                                      stride=STRIDE, cnn_mode="window", jobs=2, work=tmp)
            with mock.patch.object(yamnet, "EMBED_CHUNK", 2):   # three chunks, two jobs
                yamnet.stage_embed(args, rows)
            fc = yamnet.yamnet_fc(YAMNET)
            for r in rows:
                alone = os.path.join(tmp, "alone.npy")
                subprocess.run([cony_tool(), "embed", "--drop-tail", "-e", "--model", YAMNET,
                                "--stride", str(STRIDE), os.path.join(root, r["path"]), "-o",
                                alone], check=True, stdout=subprocess.DEVNULL)
                got = np.load(token_path(args.cache, r))
                np.testing.assert_array_equal(got, np.load(alone))
                np.testing.assert_array_equal(np.load(token_path(args.cache, r, ".scores")),
                                              yamnet.scores_of(got, fc).astype(np.float16))
            leftovers = [f for _, _, fs in os.walk(args.cache) for f in fs
                         if f.endswith((".part.npy", ".list"))]
            self.assertEqual(leftovers, [])
            with mock.patch.object(yamnet, "embed_list") as again:   # all cached now
                yamnet.stage_embed(args, rows)
                again.assert_not_called()


if __name__ == "__main__":
    unittest.main()
