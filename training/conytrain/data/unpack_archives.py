#!/usr/bin/python3
"""Unpacks the sound files that some data packages keep inside archive files, or in a
format sox cannot read, so that the data set builder can read them like any other file:

  *.cat  OpenTTD sound sets (openttd-opensfx's opensfx.cat): a table of (offset, size)
         pairs, little-endian uint32, the first offset giving the table's length; each entry
         is a length-prefixed name followed by a RIFF WAVE file.
         -> <archive>.d/NN_<title>.wav
  *.rcc  Qt binary resources (gcompris-qt-data's activity files): a 'qres' header, a tree
         of nodes, a name table (UTF-16BE) and a data table (uint32 big-endian length, then
         the bytes; zlib-compressed when the node's flag 1 is set, after a 4-byte size).
         -> <archive>.d/<path inside the resource>, sound files only
  *.zip  0 A.D.'s public.zip (0ad-data): only the members under ZIP_KEEP (animals,
         ambiences, music), then the zip itself is deleted (3.3 GB, of which they are a
         small part).  -> <archive>.d/<member path>
  *.pk3  UFO: Alien Invasion's sound pack (ufoai-sound's 0snd.pk3, a zip): only the members
         under PK3_KEEP (ambiences).  -> <archive>.d/<member path>
  *.opus Ogg Opus (warzone2100-music), which sox cannot read: decoded by GStreamer
         (gst-launch-1.0, decodebin: Ogg demuxer and opusdec) to 16 kHz mono.  -> <file>.wav

    unpack_archives.py DIR     every such file under DIR

A malformed archive is an error that names the file and what was wrong.
"""

import os
import re
import struct
import subprocess
import sys
import zipfile
import zlib

SOUND = (".wav", ".ogg", ".oga", ".flac")
ZIP_KEEP = ("audio/actor/fauna/", "audio/ambient/", "audio/music/", "audio/voice/global/")
PK3_KEEP = ("sound/ambience/",)


class ArchiveError(Exception):
    pass


def _u32(fmt, data, off, path, what):
    if off < 0 or off + 4 > len(data):
        raise ArchiveError("%s: %s at byte %d is past the end (%d bytes)" % (path, what, off, len(data)))
    return struct.unpack_from(fmt, data, off)[0]


def cat_entries(path):
    """(index, name, wav bytes) of an OpenTTD .cat sound archive."""
    with open(path, "rb") as f:
        data = f.read()
    first = _u32("<I", data, 0, path, "first entry offset") & 0x7FFFFFFF
    if first % 8 or first == 0:
        raise ArchiveError("%s: table length %d is not a positive multiple of 8" % (path, first))
    out = []
    for i in range(first // 8):
        off = _u32("<I", data, 8 * i, path, "entry offset") & 0x7FFFFFFF
        size = _u32("<I", data, 8 * i + 4, path, "entry size")
        if off + size > len(data) or size < 1:
            raise ArchiveError("%s: entry %d (offset %d, size %d) is outside the file" % (path, i, off, size))
        nlen = data[off]
        name = data[off + 1:off + 1 + nlen].rstrip(b"\0").decode("latin-1")
        body = data[off + 1 + nlen:off + size]
        if not body:
            continue                 # a placeholder entry without sound
        if body[:4] != b"RIFF":
            raise ArchiveError("%s: entry %d (%r) is not a RIFF WAVE file" % (path, i, name))
        out.append((i, name, body))
    return out


def rcc_entries(path):
    """(path inside the resource, bytes) of every file in a Qt .rcc resource."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"qres":
        raise ArchiveError("%s: no 'qres' magic: not a Qt resource file" % path)
    version = _u32(">I", data, 4, path, "version")
    tree, payload, names = (_u32(">I", data, 8 + 4 * k, path, "table offset") for k in range(3))
    node = 14 if version == 1 else 22
    out = []

    def name_at(off):
        n = struct.unpack_from(">H", data, names + off)[0]
        return data[names + off + 6:names + off + 6 + 2 * n].decode("utf-16-be")

    def walk(i, prefix, depth):
        if depth > 64:
            raise ArchiveError("%s: resource tree deeper than 64 levels" % path)
        p = tree + i * node
        if p + 14 > len(data):
            raise ArchiveError("%s: tree node %d is past the end" % (path, i))
        name_off, flags = struct.unpack_from(">IH", data, p)
        name = name_at(name_off) if i else ""
        full = "%s/%s" % (prefix, name) if name else prefix
        if flags & 2:                                  # a directory
            count, first = struct.unpack_from(">II", data, p + 6)
            for c in range(first, first + count):
                walk(c, full, depth + 1)
            return
        off = payload + _u32(">I", data, p + 10, path, "data offset")
        size = _u32(">I", data, off, path, "data length")
        blob = data[off + 4:off + 4 + size]
        if len(blob) != size:
            raise ArchiveError("%s: %s is cut short" % (path, full))
        if flags & 1:                                  # zlib, after a 4-byte length
            try:
                blob = zlib.decompress(blob[4:])
            except zlib.error as e:
                raise ArchiveError("%s: %s does not decompress: %s" % (path, full, e))
        out.append((full.lstrip("/"), blob))

    walk(0, "", 0)
    return out


def slug(name):
    """A file name from an OpenTTD sound's description, without its credits ("Ship horn
    (Original ... by ...)" -> Ship_horn)."""
    title = re.split(r"\s*[(-]?\s*\b(?:Original|Orignal|By)\b", name)[0]
    return re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_")[:40] or "sound"


def zip_entries(path, keep=ZIP_KEEP):
    """(member path, bytes) of the sound members under @keep of a zip file, one at a
    time (a generator: the members are not all held in memory)."""
    try:
        with zipfile.ZipFile(path) as z:
            for m in z.namelist():
                if m.startswith(keep) and m.lower().endswith(SOUND):
                    yield m, z.read(m)
    except (zipfile.BadZipFile, zlib.error) as e:
        raise ArchiveError("%s: not a readable zip file: %s" % (path, e))


def decode_opus(path):
    """path.wav: the Ogg Opus file decoded to 16 kHz mono 16-bit PCM."""
    with open(path, "rb") as f:
        head = f.read(512)
    if not head.startswith(b"OggS") or b"OpusHead" not in head:
        raise ArchiveError("%s: not an Ogg Opus file (no OpusHead in its first page)" % path)
    out = path + ".wav"
    cmd = ["gst-launch-1.0", "-q", "filesrc", "location=" + path, "!", "decodebin",
           "!", "audioconvert", "!", "audioresample", "!", "audio/x-raw,format=S16LE,channels=1,rate=16000",
           "!", "wavenc", "!", "filesink", "location=" + out]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ArchiveError("%s: gst-launch-1.0 could not decode it: %s" % (path, e))
    if r.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) <= 44:
        raise ArchiveError("%s: gst-launch-1.0 could not decode it (exit %d): %s"
                           % (path, r.returncode, r.stderr.strip()[-300:]))
    return 1


# archive extension -> its sound members as (path under <archive>.d/, bytes)
MEMBERS = {
    ".cat": lambda a: (("%02d_%s.wav" % (i, slug(name)), body) for i, name, body in cat_entries(a)),
    ".rcc": lambda a: ((p, b) for p, b in rcc_entries(a) if p.lower().endswith(SOUND)),
    ".zip": zip_entries,
    ".pk3": lambda a: zip_entries(a, PK3_KEEP),
}


def unpack(archive):
    """Writes the archive's sound files under <archive>.d/ (or decodes an .opus file to
    <file>.wav); returns how many files it wrote."""
    ext = os.path.splitext(archive)[1]
    if ext == ".opus":
        return decode_opus(archive)
    dest = archive + ".d"
    n = 0
    for rel, body in MEMBERS[ext](archive):
        target = os.path.normpath(os.path.join(dest, rel))
        if not target.startswith(dest + os.sep):
            raise ArchiveError("%s: member %r points outside the archive" % (archive, rel))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(body)
        n += 1
    if ext == ".zip":
        os.remove(archive)
    return n


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: unpack_archives.py DIR")
    for d, _, files in os.walk(sys.argv[1]):
        for f in sorted(files):
            if os.path.splitext(f)[1] in (*MEMBERS, ".opus"):
                p = os.path.join(d, f)
                try:
                    n = unpack(p)
                except (ArchiveError, OSError, struct.error, UnicodeDecodeError) as e:
                    sys.exit("unpack_archives: error: %s" % e)
                print("unpack_archives: %s: %d sound files" % (p, n), file=sys.stderr)


if __name__ == "__main__":
    main()
