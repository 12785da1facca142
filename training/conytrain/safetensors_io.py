"""Minimal safetensors reading and writing with numpy (no third-party package).

File layout: 8-byte little-endian header length N, N bytes of JSON mapping each tensor
name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the end
of the header), optionally "__metadata__": {str: str}; then the raw little-endian data.
Written tensors are float32 ("F32") or, when asked, F16 or I8 (int8 arrays as they are);
reading also accepts F16, F64, I64, I32 and I8.
"""

import json
import struct

import numpy as np

_DTYPES = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


def save(path, tensors, metadata=None, dtypes=None):
    """Writes {name: array} as F32 tensors, in name order; metadata: {str: str} or None;
    dtypes: {name: "F16"} for tensors to store as F16 (rounded to nearest) instead, or
    {name: "I8"} (or "U8", "I64") for integer arrays of that type stored as they are."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        dt = (dtypes or {}).get(name, "F32")
        if dt not in ("F32", "F16", "I8", "U8", "I64"):
            raise ValueError(f"tensor {name}: can only write F32 or F16 (or I8, U8, I64), not {dt}")
        want = {"I8": np.int8, "U8": np.uint8, "I64": np.int64}.get(dt)
        if want is not None and np.asarray(tensors[name]).dtype != want:
            raise ValueError(f"tensor {name}: {dt} takes an {np.dtype(want)} array, not "
                             f"{np.asarray(tensors[name]).dtype}")
        arr = np.ascontiguousarray(np.asarray(tensors[name], dtype=_DTYPES[dt]))
        if not np.isfinite(arr).all():
            raise ValueError(f"tensor {name}: non-finite values (out of the {dt} range?)")
        data = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)     # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def load(path):
    """Returns ({name: array}, metadata dict) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds the file size {len(raw)}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {info['data_offsets']}")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
    return tensors, metadata
