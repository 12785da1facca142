"""A reader of Qt's binary resource files (.rcc, as `rcc -binary` writes them), for the
photographs gcompris-qt-data packs in them (conytrain/av/sources.py).

Layout (Qt's rcc format, versions 1 to 3; big-endian throughout):
  header: b"qres", version u32, tree offset u32, data offset u32, names offset u32,
          (version >= 3) format flags u32
  tree:   one entry per node, 14 bytes (version 1) or 22 bytes (version >= 2: an 8-byte
          modification time appended): name offset u32, flags u16, then for a directory
          child count u32 and first child index u32, for a file territory u16, language
          u16 and data offset u32. Entry 0 is the root directory.
  names:  at a name offset, length u16, hash u32, then the name in UTF-16BE.
  data:   at a data offset, size u32 and the bytes; flag 1: zlib (a u32 of the unpacked
          size, then a zlib stream), flag 4: zstd (unsupported here: an error).

    python3 -m conytrain.av.rcc FILE.rcc [DEST]   lists the files, or unpacks them to DEST
"""

import os
import struct
import sys
import zlib

COMPRESSED, DIRECTORY, COMPRESSED_ZSTD = 1, 2, 4


class RccError(ValueError):
    pass


def _u16(b, o):
    return struct.unpack_from(">H", b, o)[0]


def _u32(b, o):
    return struct.unpack_from(">I", b, o)[0]


def _header(b, path):
    if len(b) < 20 or b[:4] != b"qres":
        raise RccError(f"{path}: not a Qt resource file (no 'qres' magic)")
    version, tree, data, names = struct.unpack_from(">IIII", b, 4)
    if version not in (1, 2, 3):
        raise RccError(f"{path}: rcc version {version} (this reader knows 1 to 3)")
    if max(tree, data, names) >= len(b):
        raise RccError(f"{path}: an offset past the end of the file ({len(b)} bytes)")
    return version, tree, data, names


def _name(b, names, off):
    n = _u16(b, names + off)
    start = names + off + 6
    return b[start:start + 2 * n].decode("utf-16-be")


def _payload(b, data, off, flags, path, name):
    size = _u32(b, data + off)
    raw = b[data + off + 4:data + off + 4 + size]
    if len(raw) != size:
        raise RccError(f"{path}: {name}: data runs past the end of the file")
    if flags & COMPRESSED_ZSTD:
        raise RccError(f"{path}: {name}: zstd-compressed (not supported)")
    if flags & COMPRESSED:
        want = _u32(raw, 0)
        out = zlib.decompress(raw[4:])
        if len(out) != want:
            raise RccError(f"{path}: {name}: unpacked {len(out)} bytes, header says {want}")
        return out
    return raw


def read(path):
    """{name ('dir/sub/file.png'): bytes} of every file in the resource file."""
    with open(path, "rb") as f:
        b = f.read()
    version, tree, data, names = _header(b, path)
    entry = 14 if version == 1 else 22
    out = {}

    def walk(index, prefix, depth):
        if depth > 64:
            raise RccError(f"{path}: directories nested too deep (a loop?)")
        o = tree + index * entry
        if o + 14 > len(b):
            raise RccError(f"{path}: tree entry {index} past the end of the file")
        name = _name(b, names, _u32(b, o)) if index else ""
        flags = _u16(b, o + 4)
        full = f"{prefix}/{name}" if prefix else name
        if flags & DIRECTORY:
            count, first = _u32(b, o + 6), _u32(b, o + 10)
            for k in range(first, first + count):
                walk(k, full, depth + 1)
        else:
            out[full] = _payload(b, data, _u32(b, o + 10), flags, path, full)

    try:
        walk(0, "", 0)
    except struct.error as e:   # a field cut off by a truncated file
        raise RccError(f"{path}: a field runs past the end of the file ({e})") from None
    return out


def unpack(path, dest):
    """Writes every file of the resource file under dest; returns their paths."""
    written = []
    for name, blob in sorted(read(path).items()):
        p = os.path.join(dest, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(blob)
        written.append(p)
    return written


def main(argv):
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    if len(argv) == 2:
        for p in unpack(argv[0], argv[1]):
            print(p)
    else:
        for name, blob in sorted(read(argv[0]).items()):
            print(f"{len(blob):9d} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
