"""convert_vggish.py on a randomly initialised torchvggish-layout module saved with
torch.save; if a built `cony` tool is found (env CONY_TOOL, or build*/tools/cony), its
embeddings of the converted file are compared with torch's."""

import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from conytrain import safetensors_io
from conytrain.cnn import convert_vggish
from conytrain.cnn.vggish import VGGishLike, postprocess_torch
from conytrain.golden.check import find_tool


CONV = (8, "M", 16, "M", 16, 16, "M", 32, 32, "M")
FC = (32, 32, 128)


class ConvertTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.tmp = tempfile.TemporaryDirectory()
        self.model = VGGishLike(CONV, FC, final_relu=True)   # torchvggish: ReLU at the end
        self.pth = os.path.join(self.tmp.name, "vggish.pth")
        torch.save(self.model.state_dict(), self.pth)
        rng = np.random.default_rng(1)
        q, _ = np.linalg.qr(rng.standard_normal((128, 128)))
        # torchvggish's PCA .pth holds numpy arrays (float64).
        self.pca = {"pca_eigen_vectors": q * 20.0, "pca_means": rng.standard_normal(128) * 0.01}
        self.pca_pth = os.path.join(self.tmp.name, "pca.pth")
        torch.save(self.pca, self.pca_pth)
        self.out = os.path.join(self.tmp.name, "out.safetensors")

    def tearDown(self):
        self.tmp.cleanup()

    def test_names_and_values_one_to_one(self):
        rc = convert_vggish.main([self.pth, "--pca", self.pca_pth, "-o", self.out])
        self.assertEqual(rc, 0)
        tensors, meta = safetensors_io.load(self.out)
        sd = self.model.state_dict()
        self.assertEqual(sorted(tensors), sorted(list(sd) + ["pca_eigen_vectors", "pca_means"]))
        for name, value in sd.items():
            self.assertEqual(tensors[name].shape, tuple(value.shape), name)
            np.testing.assert_array_equal(tensors[name], value.numpy(), err_msg=name)
        np.testing.assert_array_equal(tensors["pca_eigen_vectors"],
                                      self.pca["pca_eigen_vectors"].astype(np.float32))
        self.assertEqual(tensors["pca_means"].shape, (128,))
        self.assertEqual(meta["final_relu"], "true")
        self.assertEqual((meta["input_height"], meta["input_width"], meta["input_channels"]),
                         ("96", "64", "1"))
        # The converted tensors rebuild the same function.
        again = VGGishLike(CONV, FC, final_relu=True)
        again.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()
                               if not k.startswith("pca")})
        x = torch.randn(2, 96, 64)
        with torch.no_grad():
            torch.testing.assert_close(again(x), self.model(x))

    def test_no_final_relu_and_npz_pca_and_pproc(self):
        npz = os.path.join(self.tmp.name, "pca.npz")
        np.savez(npz, **self.pca)
        self.assertEqual(convert_vggish.main([self.pth, "--pca", npz, "--no-final-relu",
                                              "-o", self.out]), 0)
        tensors, meta = safetensors_io.load(self.out)
        self.assertEqual(meta["final_relu"], "false")
        self.assertIn("pca_means", tensors)
        # A full VGGish(postprocess=True)-style state_dict carries pproc.* (means (128, 1)).
        sd = dict(self.model.state_dict())
        sd["pproc.pca_eigen_vectors"] = torch.as_tensor(self.pca["pca_eigen_vectors"], dtype=torch.float)
        sd["pproc.pca_means"] = torch.as_tensor(self.pca["pca_means"].reshape(-1, 1), dtype=torch.float)
        full = os.path.join(self.tmp.name, "full.pth")
        torch.save(sd, full)
        self.assertEqual(convert_vggish.main([full, "-o", self.out]), 0)
        tensors, _ = safetensors_io.load(self.out)
        self.assertEqual(tensors["pca_means"].shape, (128,))
        self.assertEqual(tensors["pca_eigen_vectors"].shape, (128, 128))

    def test_bad_inputs_refused(self):
        sd = dict(self.model.state_dict())
        sd["features_network.0.weight"] = sd.pop("features.0.weight")
        bad = os.path.join(self.tmp.name, "bad.pth")
        torch.save(sd, bad)
        with self.assertRaisesRegex(ValueError, "features_network.0.weight"):
            convert_vggish.convert(bad)
        sd = dict(self.model.state_dict())
        sd["features.3.weight"] = sd["features.3.weight"][:, :, :2, :]
        torch.save(sd, bad)
        with self.assertRaisesRegex(ValueError, r"features.3.weight .*\(out, in, 3, 3\)"):
            convert_vggish.convert(bad)
        torch.save({"pca_means": np.zeros(128)}, self.pca_pth)
        with self.assertRaisesRegex(ValueError, "pca_eigen_vectors is missing"):
            convert_vggish.convert(self.pth, self.pca_pth)
        self.assertEqual(convert_vggish.main([bad, "-o", self.out]), 1)

    def embed_with_tool(self, seed, *options):
        """(patches, embeddings): 3 random patches through `cony embed` on self.out."""
        tool = find_tool()
        if tool is None:
            self.skipTest("no built cony tool (set CONY_TOOL)")
        help_text = subprocess.run([tool, "embed", "--help"], capture_output=True, text=True)
        if help_text.returncode != 0:
            self.skipTest("this cony has no embed command")
        x = np.random.default_rng(seed).standard_normal((3, 96, 64)).astype(np.float32)
        inp = os.path.join(self.tmp.name, "patches.npy")
        np.save(inp, x)
        got_path = os.path.join(self.tmp.name, "emb.npy")
        subprocess.run([tool, "embed", "--model", self.out, *options, inp, "-o", got_path],
                       check=True, capture_output=True)
        return x, np.load(got_path)

    @staticmethod
    def torch64(weights, x):
        """The reference: the torchvggish-layout network in float64 on @weights."""
        m64 = VGGishLike(CONV, FC, final_relu=True).double()
        m64.load_state_dict({k: torch.as_tensor(np.asarray(v, dtype=np.float64))
                             for k, v in weights.items()})
        with torch.no_grad():
            return m64(torch.from_numpy(x).double()).numpy()

    def test_cony_embed_matches_torch(self):
        self.assertEqual(convert_vggish.main([self.pth, "--pca", self.pca_pth, "-o", self.out]), 0)
        x, got = self.embed_with_tool(2)
        want = self.torch64({k: v.numpy() for k, v in self.model.state_dict().items()}, x)
        self.assertEqual(got.shape, (3, 128))
        self.assertLess(np.abs(got - want).max() / np.abs(want).max(), 1e-4)
        # With the torchvggish postprocess.
        _, pp = self.embed_with_tool(2, "--postprocess", "torch")
        want_pp = postprocess_torch(want.astype(np.float32), self.pca["pca_eigen_vectors"],
                                    self.pca["pca_means"])
        self.assertLessEqual(np.abs(pp - want_pp).max(), 1.0)
        self.assertLessEqual(int((pp != want_pp).sum()), 3)

    def test_f16_weights(self):
        self.assertEqual(convert_vggish.main([self.pth, "--pca", self.pca_pth, "--dtype", "f16",
                                              "-o", self.out]), 0)
        tensors, metadata = safetensors_io.load(self.out)
        self.assertEqual(metadata["weights_dtype"], "F16")
        sd = self.model.state_dict()
        for name, value in tensors.items():
            want = np.float16 if name.endswith(".weight") else np.float32
            self.assertEqual(value.dtype, want, name)
            if name in sd and name.endswith(".weight"):
                np.testing.assert_array_equal(value, sd[name].numpy().astype(np.float16))
        x, got = self.embed_with_tool(3)
        # Reference: torch in float64 on the F16-rounded weights.
        want = self.torch64({k: tensors[k] for k in sd}, x)
        self.assertLess(np.abs(got - want).max() / np.abs(want).max(), 1e-4)

if __name__ == "__main__":
    unittest.main()
