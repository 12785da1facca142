"""audio/token_cache.py: the cache records its CNN once and refuses tokens of another."""

import json
import os
import tempfile
import unittest

from conytrain.audio import token_cache


class TokenCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cnn_a, self.cnn_b = (os.path.join(self.tmp.name, n) for n in ("a.bin", "b.bin"))
        for p, data in ((self.cnn_a, b"one"), (self.cnn_b, b"two")):
            with open(p, "wb") as f:
                f.write(data)
        self.cache = os.path.join(self.tmp.name, "cache")

    def tearDown(self):
        self.tmp.cleanup()

    def test_records_the_cnn_and_refuses_another(self):
        token_cache.check_cache(self.cnn_a, self.cache)
        with open(os.path.join(self.cache, "yamnet.json")) as f:
            info = json.load(f)
        self.assertEqual(info["stride_frames"], token_cache.STRIDE)
        token_cache.check_cache(self.cnn_a, self.cache)          # the same CNN: fine
        with self.assertRaisesRegex(RuntimeError, "tokens of another CNN .*a.bin"):
            token_cache.check_cache(self.cnn_b, self.cache)

    def test_refuses_another_stride_or_mode(self):
        # rule 36: continual tokens at stride 32 never mix with window tokens at 25
        token_cache.check_cache(self.cnn_a, self.cache)
        with self.assertRaisesRegex(RuntimeError, "stride 25, mode window, not 32, continual"):
            token_cache.check_cache(self.cnn_a, self.cache, stride=32, mode="continual")
        other = os.path.join(self.tmp.name, "cache-continual")
        token_cache.check_cache(self.cnn_a, other, stride=32, mode="continual")
        with open(os.path.join(other, "yamnet.json")) as f:
            info = json.load(f)
        self.assertEqual((info["stride_frames"], info["cnn_mode"]), (32, "continual"))
        with self.assertRaisesRegex(RuntimeError, "stride 32, mode continual, not 25, window"):
            token_cache.check_cache(self.cnn_a, other)

    def test_read_only_writes_nothing(self):
        token_cache.check_cache(self.cnn_a, self.cache, write=False)
        self.assertFalse(os.path.exists(os.path.join(self.cache, "yamnet.json")))

    def test_token_path(self):
        r = {"set": "audio-dataset-v9", "path": "clips/train/noise/x.wav"}
        self.assertEqual(token_cache.token_path("C", r, ".scores"),
                         os.path.join("C", "audio-dataset-v9", "clips/train/noise/x.scores.npy"))


if __name__ == "__main__":
    unittest.main()
