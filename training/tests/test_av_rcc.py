"""conytrain/av/rcc.py reads Qt resource files (gcompris-qt-data's photographs): files in
nested directories, stored and zlib-compressed, versions 1 to 3; a truncated or foreign
file, a bad offset and zstd data are errors naming the file. Also the fused model's split
with its validation eighth (rule 5): runs 1-4's test groups stay test."""

import hashlib
import os
import struct
import tempfile
import unittest
import zlib

from conytrain.av import rcc, sources


def build_rcc(tree, version=2, compress=()):
    """A resource file of tree {name: bytes or {name: ...}}, laid out as Qt's rcc tool
    does: the tree breadth-first, each directory's children consecutive."""
    names, data = bytearray(), bytearray()
    name_off = {}

    def name(n):
        if n not in name_off:
            name_off[n] = len(names)
            u = n.encode("utf-16-be")
            names.extend(struct.pack(">HI", len(n), 0) + u)
        return name_off[n]

    entries = [None]                 # entry 0: the root
    queue = [(0, "", tree)]
    while queue:
        index, n, node = queue.pop(0)
        off = name(n) if index else 0
        if isinstance(node, dict):
            first = len(entries)
            kids = sorted(node.items())
            entries.extend([None] * len(kids))
            entries[index] = struct.pack(">IHII", off, rcc.DIRECTORY, len(kids), first)
            queue.extend((first + k, kn, kv) for k, (kn, kv) in enumerate(kids))
        else:
            flags, blob = 0, node
            if n in compress:
                flags, blob = rcc.COMPRESSED, struct.pack(">I", len(node)) + zlib.compress(node)
            entries[index] = struct.pack(">IHHHI", off, flags, 0, 0, len(data))
            data.extend(struct.pack(">I", len(blob)) + blob)
    pad = b"" if version == 1 else b"\0" * 8
    tree_b = b"".join(e + pad for e in entries)
    head = 20 + (4 if version >= 3 else 0)
    t0, n0 = head, head + len(tree_b)
    d0 = n0 + len(names)
    out = b"qres" + struct.pack(">IIII", version, t0, d0, n0)
    if version >= 3:
        out += struct.pack(">I", 0)
    return out + tree_b + bytes(names) + bytes(data)


TREE = {"gcompris": {"a": {"cat.webp": b"RIFF-cat", "README": b"License: CC0-1.0\n"},
                     "b.txt": b"x" * 300}}
FLAT = {"gcompris/a/cat.webp": b"RIFF-cat", "gcompris/a/README": b"License: CC0-1.0\n",
        "gcompris/b.txt": b"x" * 300}


class RccTest(unittest.TestCase):
    def write(self, blob):
        fd, path = tempfile.mkstemp(suffix=".rcc")
        os.write(fd, blob)
        os.close(fd)
        self.addCleanup(os.remove, path)
        return path

    def test_versions_and_compression(self):
        for version in (1, 2, 3):
            path = self.write(build_rcc(TREE, version, compress=("b.txt",)))
            self.assertEqual(rcc.read(path), FLAT, f"version {version}")

    def test_unpack_writes_the_tree(self):
        path = self.write(build_rcc(TREE))
        with tempfile.TemporaryDirectory() as d:
            rcc.unpack(path, d)
            with open(os.path.join(d, "gcompris", "a", "cat.webp"), "rb") as f:
                self.assertEqual(f.read(), b"RIFF-cat")

    def test_bad_files_are_errors_naming_the_file(self):
        good = build_rcc(TREE)
        cases = {"not a Qt resource": b"PK\3\4" + good[4:],
                 "rcc version 9": good[:4] + struct.pack(">I", 9) + good[8:],
                 "past the end": good[:4 + 4] + struct.pack(">I", 10 ** 6) + good[12:],
                 "runs past the end": good[:-10]}
        for what, blob in cases.items():
            path = self.write(blob)
            with self.assertRaisesRegex(rcc.RccError, f"{os.path.basename(path)}.*{what}"):
                rcc.read(path)

    def test_zstd_is_refused(self):
        blob = bytearray(build_rcc({"z.bin": b"abc"}))
        t0 = struct.unpack_from(">I", blob, 8)[0]
        struct.pack_into(">H", blob, t0 + 22 + 4, rcc.COMPRESSED_ZSTD)   # entry 1's flags
        with self.assertRaisesRegex(rcc.RccError, "z.bin: zstd"):
            rcc.read(self.write(bytes(blob)))


class ValSplitTest(unittest.TestCase):
    def test_test_groups_as_before_and_an_eighth_val(self):
        groups = [f"photo:p{i}" for i in range(4000)]
        splits = [sources.split_of(g) for g in groups]
        self.assertAlmostEqual(splits.count("test") / 4000, 0.25, delta=0.03)
        self.assertAlmostEqual(splits.count("val") / 4000, 0.125, delta=0.03)
        for g in sources.TEST_GROUPS:
            self.assertEqual(sources.split_of(g), "test")
        for g in sources.TRAIN_GROUPS:
            self.assertEqual(sources.split_of(g), "train")
        self.assertEqual(sources.split_of("photo:grace_hopper"), "val")
        # runs 1-4's rule (a quarter by hash) still decides test; val comes only from train
        for g, split in zip(groups, splits):
            old_test = int(hashlib.sha256(g.encode()).hexdigest()[:8], 16) % 4 == 0
            self.assertEqual(split == "test", old_test, g)

if __name__ == "__main__":
    unittest.main()
