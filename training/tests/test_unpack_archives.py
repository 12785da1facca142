"""training/conytrain/data/unpack_archives.py: OpenTTD .cat and Qt .rcc archives written here byte by
byte (the layouts its docstring describes) and zip files unpack to the same bytes;
placeholders and non-sound members are skipped; malformed archives and undecodable Opus
files raise an error that names the file."""

import os
import struct
import subprocess
import tempfile
import unittest
import wave
import zipfile
import zlib

from conytrain.data import unpack_archives as ua


def wav_bytes(n):
    data = bytes(range(n % 256)) * 2
    return b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + bytes(20) + b"data" + \
        struct.pack("<I", len(data)) + data


def write_cat(path, entries):
    """entries: (name, body); body b"" is a placeholder."""
    table = 8 * len(entries)
    blobs, off = [], table
    head = b""
    for name, body in entries:
        nb = name.encode("latin-1") + b"\0"
        blob = bytes([len(nb)]) + nb + body
        head += struct.pack("<II", off, len(blob))
        blobs.append(blob)
        off += len(blob)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


def write_rcc(path, files):
    """A version-2 Qt resource: one directory 'res' holding files (name, bytes, compress)."""
    names = b""
    name_off = {}
    for n in ["res"] + [n for n, _, _ in files]:
        name_off[n] = len(names)
        u = n.encode("utf-16-be")
        names += struct.pack(">HI", len(n), 0) + u
    data = b""
    data_off = []
    for _, body, compress in files:
        data_off.append(len(data))
        payload = struct.pack(">I", len(body)) + zlib.compress(body) if compress else body
        data += struct.pack(">I", len(payload)) + payload
    nodes = struct.pack(">IHII", 0, 2, 1, 1) + bytes(8)                 # root: 1 child at 1
    nodes += struct.pack(">IHII", name_off["res"], 2, len(files), 2) + bytes(8)
    for (n, _, compress), doff in zip(files, data_off):
        nodes += struct.pack(">IHHHI", name_off[n], 1 if compress else 0, 0, 0, doff) + bytes(8)
    header_len = 20
    tree = header_len
    dat = tree + len(nodes)
    nam = dat + len(data)
    with open(path, "wb") as f:
        f.write(b"qres" + struct.pack(">IIII", 2, tree, dat, nam) + nodes + data + names)


class UnpackArchives(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_cat(self):
        p = os.path.join(self.dir, "s.cat")
        a, b = wav_bytes(40), wav_bytes(77)
        write_cat(p, [("Ship horn (Original x.wav by Someone)", a), ("Empty", b""),
                      ("Level crossing", b)])
        self.assertEqual(ua.unpack(p), 2)
        d = p + ".d"
        self.assertEqual(sorted(os.listdir(d)), ["00_Ship_horn.wav", "02_Level_crossing.wav"])
        self.assertEqual(open(os.path.join(d, "00_Ship_horn.wav"), "rb").read(), a)
        self.assertEqual(open(os.path.join(d, "02_Level_crossing.wav"), "rb").read(), b)

    def test_rcc_plain_and_compressed(self):
        p = os.path.join(self.dir, "r.rcc")
        one, two = b"OggS" + bytes(range(200)), b"RIFF" + bytes(300)
        write_rcc(p, [("one.ogg", one, False), ("two.wav", two, True), ("notes.txt", b"hi", False)])
        self.assertEqual(ua.unpack(p), 2)
        self.assertEqual(open(os.path.join(p + ".d", "res", "one.ogg"), "rb").read(), one)
        self.assertEqual(open(os.path.join(p + ".d", "res", "two.wav"), "rb").read(), two)
        self.assertFalse(os.path.exists(os.path.join(p + ".d", "res", "notes.txt")))

    def test_zip_keeps_only_sound_under_zip_keep_and_removes_the_zip(self):
        p = os.path.join(self.dir, "public.zip")
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("audio/ambient/water/river_1.ogg", b"OggS-river")
            z.writestr("audio/music/theme.ogg", b"OggS-theme")
            z.writestr("audio/ambient/readme.txt", b"not a sound")
            z.writestr("audio/interface/click.ogg", b"OggS-click")
        self.assertEqual(ua.unpack(p), 2)
        self.assertFalse(os.path.exists(p))
        d = p + ".d"
        self.assertEqual(open(os.path.join(d, "audio/ambient/water/river_1.ogg"), "rb").read(),
                         b"OggS-river")
        self.assertEqual(open(os.path.join(d, "audio/music/theme.ogg"), "rb").read(), b"OggS-theme")
        self.assertFalse(os.path.exists(os.path.join(d, "audio/interface")))

    def test_pk3_keeps_only_ambience_sounds_and_the_pack(self):
        # UFO:AI's 0snd.pk3 (ufoai-sound, data set version 14): a zip read under PK3_KEEP
        p = os.path.join(self.dir, "0snd.pk3")
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("sound/ambience/cricket_loop.ogg", b"OggS-cricket")
            z.writestr("sound/aliens/ortnok/hurt1.ogg", b"OggS-alien")
            z.writestr("sound/ambience/notes.txt", b"not a sound")
        self.assertEqual(ua.unpack(p), 1)
        self.assertTrue(os.path.exists(p))
        d = p + ".d"
        self.assertEqual(open(os.path.join(d, "sound/ambience/cricket_loop.ogg"), "rb").read(),
                         b"OggS-cricket")
        self.assertFalse(os.path.exists(os.path.join(d, "sound/aliens")))

    def test_opus_decodes_to_16k_mono_wav(self):
        p = os.path.join(self.dir, "tone.opus")
        r = subprocess.run(["gst-launch-1.0", "-q", "audiotestsrc", "num-buffers=25", "freq=1000", "!",
                            "audio/x-raw,rate=48000,channels=2", "!", "opusenc", "!", "oggmux", "!",
                            "filesink", "location=" + p], capture_output=True)
        if r.returncode != 0:
            self.skipTest("gst-launch-1.0 with opusenc is not available")
        self.assertEqual(ua.unpack(p), 1)
        with wave.open(p + ".wav") as w:
            self.assertEqual((w.getframerate(), w.getnchannels(), w.getsampwidth()), (16000, 1, 2))
            # 25 buffers of 1024 samples at 48 kHz = 0.53 s, give or take the codec's edges
            self.assertAlmostEqual(w.getnframes() / 16000.0, 25 * 1024 / 48000.0, delta=0.05)

    def test_bad_opus_is_named(self):
        p = os.path.join(self.dir, "track.opus")
        open(p, "wb").write(b"OggS" + bytes(100))
        with self.assertRaisesRegex(ua.ArchiveError, "track.opus: not an Ogg Opus file"):
            ua.unpack(p)

    def test_malformed(self):
        bad_magic = os.path.join(self.dir, "bad.rcc")
        open(bad_magic, "wb").write(b"nope" + bytes(40))
        with self.assertRaisesRegex(ua.ArchiveError, "bad.rcc: no 'qres' magic"):
            ua.unpack(bad_magic)
        cut = os.path.join(self.dir, "cut.cat")
        write_cat(cut, [("A", wav_bytes(50))])
        data = open(cut, "rb").read()
        open(cut, "wb").write(data[:-10])
        with self.assertRaisesRegex(ua.ArchiveError, "cut.cat: entry 0 .* outside the file"):
            ua.unpack(cut)
        notwav = os.path.join(self.dir, "notwav.cat")
        write_cat(notwav, [("A", b"MThd" + bytes(20))])
        with self.assertRaisesRegex(ua.ArchiveError, "notwav.cat: entry 0 .* not a RIFF WAVE"):
            ua.unpack(notwav)
        empty = os.path.join(self.dir, "empty.cat")
        open(empty, "wb").write(b"\x01")
        with self.assertRaisesRegex(ua.ArchiveError, "empty.cat: first entry offset"):
            ua.unpack(empty)
        notzip = os.path.join(self.dir, "bad.zip")
        open(notzip, "wb").write(b"PK" + bytes(30))
        with self.assertRaisesRegex(ua.ArchiveError, "bad.zip: not a readable zip file"):
            ua.unpack(notzip)


if __name__ == "__main__":
    unittest.main()
