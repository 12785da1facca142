"""The committed mel golden files are what mel_reference.py computes (checked
numerically: golden/check.py says why not byte-for-byte) and an edited one is caught;
the CNN golden files are what gen_cnn_golden.py computes (numerically too) and an edit
is caught; `cony mel` (when a built tool is found) matches the float64 reference on WAV
files."""

import os
import subprocess
import tempfile
import unittest
import wave

import numpy as np

from conytrain.audio import mel as mel_reference
from conytrain.golden import cnn as gen_cnn_golden
from conytrain.golden.check import bumped, edited_copy, find_tool

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MEL = os.path.join(ROOT, "tests", "golden", "mel")
CNN = os.path.join(ROOT, "tests", "golden", "cnn")


class FrontendGoldenTest(unittest.TestCase):
    def test_mel_golden_up_to_date(self):
        self.assertEqual(mel_reference.verify(MEL), [])

    def test_mel_edits_are_caught(self):
        for rel in ("expsweep_logmel.npy", "custom_logmel.npy", "mel_matrix.npy",
                    "quiet_tone_wave.npy", "noise_wave.npy"):
            with self.subTest(rel=rel), tempfile.TemporaryDirectory() as tmp:
                self.assertTrue(mel_reference.verify(edited_copy(MEL, rel, tmp + "/g", bumped)))

    def test_cnn_golden_up_to_date(self):
        self.assertEqual(gen_cnn_golden.verify(CNN), [])

    def test_cnn_edits_are_caught(self):
        def tensor_bumped(name):
            return lambda st: ({**st[0], name: bumped(st[0][name])}, st[1])
        for rel, edit in [("small_expected.npy", bumped), ("small_pp_tf.npy", bumped),
                          ("odd_expected.npy", bumped),
                          ("small.safetensors", tensor_bumped("pca_eigen_vectors")),
                          ("small_f16.safetensors", tensor_bumped("embeddings.4.weight"))]:
            with self.subTest(rel=rel), tempfile.TemporaryDirectory() as tmp:
                self.assertTrue(gen_cnn_golden.verify(edited_copy(CNN, rel, tmp + "/g", edit)))


def write_wav(path, samples, rate):
    """samples: (n,) or (n, channels) int16."""
    data = np.asarray(samples, dtype="<i2")
    channels = 1 if data.ndim == 1 else data.shape[1]
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tool = find_tool()
        if self.tool is None:
            self.skipTest("no built cony tool (set CONY_TOOL)")
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_cony_mel_matches_reference(self):
        rng = np.random.default_rng(3)
        t = np.arange(12345) / 16000.0
        x = (0.4 * np.sin(2 * np.pi * 523.0 * t) + 0.05 * rng.standard_normal(len(t)))
        pcm = np.round(np.clip(x, -1, 1) * 32767).astype(np.int16)
        wav = os.path.join(self.tmp.name, "a.wav")
        out = os.path.join(self.tmp.name, "a.npy")
        write_wav(wav, pcm, 16000)
        subprocess.run([self.tool, "mel", wav, "-o", out], check=True)
        got = np.load(out)
        want = mel_reference.log_mel(pcm / 32768.0)
        self.assertEqual(got.shape, (1 + (12345 - 400) // 160, 64))
        self.assertEqual(got.dtype, np.float32)
        self.assertLess(np.abs(got - want).max(), 1e-3)
        # Stereo: the mean of the channels.
        write_wav(wav, np.stack([pcm, pcm // 2], axis=1), 16000)
        subprocess.run([self.tool, "mel", wav, "-o", out], check=True)
        want = mel_reference.log_mel((pcm.astype(np.float64) + (pcm // 2)) / 2 / 32768.0)
        self.assertLess(np.abs(np.load(out) - want).max(), 1e-3)

    def test_cony_mel_resamples_and_refuses_bad_files(self):
        wav = os.path.join(self.tmp.name, "b.wav")
        out = os.path.join(self.tmp.name, "b.npy")
        t = np.arange(44100) / 44100.0
        write_wav(wav, np.round(0.5 * np.sin(2 * np.pi * 1000 * t) * 32767), 44100)
        subprocess.run([self.tool, "mel", wav, "-o", out], check=True)
        got = np.load(out)
        self.assertEqual(got.shape, (98, 64))      # 1 s at 16 kHz: 1 + (16000 - 400) // 160
        self.assertEqual(int(np.argmax(got[50])), int(np.argmax(got[40])))
        with open(wav, "wb") as f:
            f.write(b"RIFF\x00\x00\x00\x00WAVEjunk")
        r = subprocess.run([self.tool, "mel", wav, "-o", out], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(wav, r.stderr)


if __name__ == "__main__":
    unittest.main()
