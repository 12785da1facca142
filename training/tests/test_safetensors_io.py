"""Round trip of training/conytrain/safetensors_io.py."""

import os
import struct
import tempfile
import unittest

import numpy as np

from conytrain import safetensors_io


class SafetensorsIoTest(unittest.TestCase):
    def test_round_trip(self):
        tensors = {"a.weight": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
                   "b": np.array([1e-30, -3.0], dtype=np.float64),
                   "scalar": np.float32(7.0)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            safetensors_io.save(path, tensors, {"config": '{"d": 8}'})
            with open(path, "rb") as f:
                raw = f.read()
            (n,) = struct.unpack("<Q", raw[:8])
            self.assertEqual((8 + n) % 8, 0)
            got, meta = safetensors_io.load(path)
            self.assertEqual(meta, {"config": '{"d": 8}'})
            self.assertEqual(set(got), set(tensors))
            for k, v in tensors.items():
                self.assertEqual(got[k].dtype, np.float32)
                np.testing.assert_array_equal(got[k], np.asarray(v, dtype=np.float32))
            with open(path, "wb") as f:
                f.write(raw[:-4])
            with self.assertRaises(ValueError):
                safetensors_io.load(path)

    def test_f16(self):
        w = np.array([[0.1, -2.0, 65504.0], [1e-7, 3.14159, 0.0]])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "h.safetensors")
            safetensors_io.save(path, {"w": w, "b": w[0]}, dtypes={"w": "F16"})
            got, _ = safetensors_io.load(path)
            self.assertEqual(got["w"].dtype, np.float16)
            np.testing.assert_array_equal(got["w"], w.astype(np.float16))
            self.assertEqual(got["b"].dtype, np.float32)
            with self.assertRaisesRegex(ValueError, "non-finite"):
                safetensors_io.save(path, {"w": np.array([1e5])}, dtypes={"w": "F16"})
            with self.assertRaisesRegex(ValueError, "F32 or F16"):
                safetensors_io.save(path, {"w": w}, dtypes={"w": "F64"})

    def test_i8(self):
        q = np.array([[-128, -1, 0], [1, 77, 127]], dtype=np.int8)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "q.safetensors")
            safetensors_io.save(path, {"q": q}, dtypes={"q": "I8"})
            got, _ = safetensors_io.load(path)
            self.assertEqual(got["q"].dtype, np.int8)
            np.testing.assert_array_equal(got["q"], q)
            with self.assertRaisesRegex(ValueError, "int8 array"):
                safetensors_io.save(path, {"q": q.astype(np.float32)}, dtypes={"q": "I8"})


if __name__ == "__main__":
    unittest.main()
