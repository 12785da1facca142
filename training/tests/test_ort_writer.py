"""The ONNX graph writers of conytrain/bench (yamnet_ort.py, mobilenet_ort.py): what they
emit for the golden networks, without ONNX Runtime; with CONY_ORT_DIR set to a directory
where `npm install --ignore-scripts onnxruntime-node` ran, also the scores ONNX Runtime
computes from the MobileNet-v2 graph against the integer reference's golden ones."""

import os
import unittest

import numpy as np

from conytrain import REPO, safetensors_io
from conytrain.bench import mobilenet_ort, yamnet_ort

GOLDEN = os.path.join(REPO, "tests", "golden", "mobilenet")
QU8 = os.path.join(GOLDEN, "v2_qu8.safetensors")


class OrtWriterTest(unittest.TestCase):
    def test_scalar_has_no_dims(self):
        # dims are field 1: a scalar starts with its data type (field 2), else QLinearAdd
        # refuses it as a scale
        self.assertEqual(yamnet_ort.tensor("s", np.float32(0.5), yamnet_ort.ONNX_FLOAT)[:1],
                         b"\x10")
        self.assertEqual(yamnet_ort.tensor("v", np.ones(3), yamnet_ort.ONNX_FLOAT)[:2], b"\x08\x03")

    def test_mobilenet_v2_graph(self):
        model, (h, w, c), classes = mobilenet_ort.build(QU8)
        _, meta = safetensors_io.load(QU8)
        words = meta["layers"].split()
        self.assertEqual((h, w, c, classes), (15, 13, 3, 10))
        convs = sum(wd in ("conv1x1", "linear1x1", "fc") or wd[:5] in ("conv3", "dw3x3")
                    for wd in words)
        self.assertEqual(model.count(b"QLinearConv"), convs)
        self.assertEqual(model.count(b"QLinearAdd"), sum(wd.startswith("add@") for wd in words))
        self.assertEqual(model.count(b"QLinearGlobalAveragePool"), 1)
        self.assertIn(b"com.microsoft", model)

    def test_refuses_float_files(self):
        with self.assertRaises(ValueError):
            mobilenet_ort.build(os.path.join(GOLDEN, "v2_f32.safetensors"))

    @unittest.skipUnless(os.environ.get("CONY_ORT_DIR"), "CONY_ORT_DIR unset: no ONNX Runtime")
    def test_golden_scores_in_ort(self):
        model, _, _ = mobilenet_ort.build(QU8)
        x, want = mobilenet_ort.golden(GOLDEN)
        res = yamnet_ort.run_node(model, x.transpose(0, 3, 1, 2), os.environ["CONY_ORT_DIR"],
                                  1, 1, True)
        self.assertIsNotNone(res)
        np.testing.assert_allclose(np.array(res["scores"]), want, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
