#!/usr/bin/python3
"""`cony tag` / `cony embed` on media files (issues 57.1, 57.3, 60.2, 60.3).

usage: test_cli_media.py CONY_TOOL SOURCE_ROOT

Hostile and damaged images, written here byte by byte, each run under a 2 GiB address
space limit and a 30 s timeout (a regression fails fast instead of eating the machine):
- headers claiming 65535 x 65535 (PNG, JPEG), 60000 x 60000 (BMP), 65535 x 65535 (GIF),
  16384 x 16384 (WebP) with a tiny body: refused before decoding, naming the file, the
  claimed size and the limit; --max-pixels lowers the limit;
- a PNG claiming 2000 x 2000 with 10 rows of data, a PNG and a JPEG cut short, a BMP
  with 10 of its rows: refused as truncated, naming what is missing;
- 16 x 10, 1 x 1, 4097 x 3 and 3 x 4097 pictures: labelled, with a warning naming the
  model's input size; 223 x 225 (odd rows) without one.
Content, not names: a JPEG named dog_noext labels as the .jpg does; OGG, FLAC and a WAV
without extension label as the WAV (same top label); a truncated OGG and FLAC give their
windows and a warning; audio for a 3-channel model names the mismatch. `cony probe` says
what it checks; pipelines/file.sh warns of a truncated OGG through it."""
import base64
import os
import resource
import struct
import subprocess
import sys
import tempfile
import zlib

AS_LIMIT = 2 << 30
failures = []


def limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=30, preexec_fn=limit)
    print("$", " ".join(os.path.basename(a) for a in args), "->", r.returncode,
          r.stderr.strip().replace("\n", " | "))
    return r


def check(cond, what):
    print(("ok - " if cond else "not ok - ") + what)
    if not cond:
        failures.append(what)


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w, h, rows):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3) & 255 for x in range(3 * w)) for y in range(rows))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def bmp(w, h, rows):
    row = (w * 3 + 3) // 4 * 4
    head = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, 0, 0, 0, 0, 0)
    return b"BM" + struct.pack("<IHHI", (54 + row * h) & 0xFFFFFFFF, 0, 0, 54) + head + b"\x80" * (row * rows)


def jpeg_with_size(jpeg, w, h):
    """@jpeg's bytes up to its first scan, its frame header claiming w x h."""
    d = bytearray(jpeg)
    i = 2
    while d[i + 1] not in (0xC0, 0xC1, 0xC2):
        i += 2 + struct.unpack(">H", d[i + 2:i + 4])[0]
    d[i + 5:i + 9] = struct.pack(">HH", h, w)
    return bytes(d[:i + 300])


def write(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def gst(tmp, name, launch):
    path = os.path.join(tmp, name)
    subprocess.run(["gst-launch-1.0", "-q"] + launch.split() + ["!", "filesink",
                   "location=" + path], check=True, timeout=60)
    return path


def top_labels(out):
    return [line.split("\t")[2].rsplit(" ", 1)[0] for line in out.splitlines()]


def main():
    cony, root = sys.argv[1], sys.argv[2]
    image_model = os.path.join(root, "models", "imagenet", "mobilenet_v2.safetensors")
    audio_model = os.path.join(root, "models", "yamnet", "yamnet.safetensors")
    tag = [cony, "tag", "--model", image_model, "-k", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        photo = gst(tmp, "photo.jpg", "videotestsrc num-buffers=1 pattern=smpte ! "
                    "video/x-raw,width=1200,height=900 ! jpegenc quality=98")
        with open(photo, "rb") as f:
            jpeg = f.read()
        # 1. claimed sizes over the limit: refused before any decoder allocates
        huge = {
            "huge.png": png(65535, 65535, 0),
            "huge.jpg": jpeg_with_size(jpeg, 65535, 65535),
            "huge.bmp": bmp(60000, 60000, 0)[:200],
            "huge.gif": b"GIF89a" + struct.pack("<HH", 65535, 65535) + b"\0\0\0" + b"\x3b",
            "huge.webp": b"RIFF" + struct.pack("<I", 30) + b"WEBPVP8X" + struct.pack("<I", 10)
            + b"\0" * 4 + (16383).to_bytes(3, "little") * 2,
        }
        for name, data in huge.items():
            r = run(tag + [write(tmp, name, data)])
            w, h = ("60000", "60000") if name.endswith("bmp") else (
                ("16384", "16384") if name.endswith("webp") else ("65535", "65535"))
            check(r.returncode == 1 and name in r.stderr and f"{w} x {h}" in r.stderr
                  and "limit of 100000000 pixels" in r.stderr,
                  f"{name}: refused naming the file, its claimed size and the limit")
        ok_png = write(tmp, "ok.png", png(300, 200, 200))
        r = run(tag + ["--max-pixels", "50000", ok_png])
        check(r.returncode == 1 and "300 x 200" in r.stderr and "limit of 50000" in r.stderr,
              "--max-pixels 50000 refuses a 300 x 200 PNG")
        r = run(tag + ["--max-pixels", "-5", ok_png])
        check(r.returncode == 1 and "--max-pixels" in r.stderr, "--max-pixels -5 is refused")
        r = run(tag + [ok_png])
        check(r.returncode == 0 and r.stdout.startswith("0\t") and r.stderr == "",
              "a whole 300 x 200 PNG is labelled without a warning")

        # 2. truncated pictures: refused, naming what is missing
        cut = {
            "rows.png": (png(2000, 2000, 10), "10 of the 2000 rows"),
            "cut.png": (png(300, 200, 200)[:700], "ends inside its IDAT chunk"),
            "cut.jpg": (jpeg[:20000], "before the end-of-image marker"),
            "rows.bmp": (bmp(2000, 2000, 10), "10 of the 2000 rows"),
        }
        for name, (data, missing) in cut.items():
            r = run(tag + [write(tmp, name, data)])
            check(r.returncode == 1 and name in r.stderr and "truncated" in r.stderr
                  and missing in r.stderr, f"{name}: refused as truncated ({missing})")

        # 3. tiny pictures: a label and a warning with the model's input size
        for name, (w, h) in {"tiny.png": (16, 10), "one.png": (1, 1), "wide.png": (4097, 3),
                             "tall.png": (3, 4097)}.items():
            r = run(tag + [write(tmp, name, png(w, h, h))])
            check(r.returncode == 0 and r.stdout.startswith("0\t") and name in r.stderr
                  and f"{w} x {h}" in r.stderr and "224 x 224" in r.stderr
                  and "unreliable" in r.stderr, f"{name}: labelled with a warning")
        r = run(tag + [write(tmp, "odd.png", png(223, 225, 225))])
        check(r.returncode == 0 and r.stdout.startswith("0\t") and r.stderr == "",
              "an odd-sized 223 x 225 PNG (row padding) is labelled without a warning")

        # 4. content, not names
        noext = write(tmp, "dog_noext", jpeg)
        a, b = run(tag + [photo]), run(tag + [noext])
        check(a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout,
              "a JPEG named dog_noext labels as the same file named .jpg")
        # a 1 x 1 lossless WebP (gdk-pixbuf's loader, webp-pixbuf-loader), and one whose
        # VP8 data is garbage
        webp = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
        r = run(tag + [write(tmp, "pixel.webp", webp)])
        check(r.returncode == 0 and r.stdout.startswith("0\t") and "1 x 1" in r.stderr,
              "a WebP is decoded and labelled (with the tiny-picture warning)")
        vp8 = b"WEBPVP8 " + struct.pack("<I", 18) + b"\x10\x02\x00" + b"\x12\x34\x56" \
            + struct.pack("<HH", 64, 48) + b"\xaa" * 8
        r = run(tag + [write(tmp, "bogus.webp", b"RIFF" + struct.pack("<I", len(vp8)) + vp8)])
        check(r.returncode == 1 and "bogus.webp" in r.stderr and "cannot decode" in r.stderr
              and "image/webp" in r.stderr, "an undecodable WebP: a 'cannot decode' error naming it")
        tone = "audiotestsrc num-buffers=160 samplesperbuffer=1000 freq=440 ! " \
               "audio/x-raw,rate=16000,channels=1"
        wav = gst(tmp, "tone.wav", tone + " ! wavenc")
        ogg = gst(tmp, "tone.ogg", tone + " ! audioconvert ! vorbisenc ! oggmux")
        flac = gst(tmp, "tone.flac", tone + " ! audioconvert ! flacenc")
        wav_noext = write(tmp, "tone_noext", open(wav, "rb").read())
        audio_tag = [cony, "tag", "--model", audio_model, "-k", "1"]
        ref = run(audio_tag + [wav])
        check(ref.returncode == 0 and len(ref.stdout.splitlines()) == 20,
              "a 10 s WAV gives 20 windows")
        for path in (ogg, flac, wav_noext):
            r = run(audio_tag + [path])
            check(r.returncode == 0 and top_labels(r.stdout) == top_labels(ref.stdout)
                  and r.stderr == "", f"{os.path.basename(path)}: the WAV's windows and labels")
        r = run([cony, "embed", "--model", audio_model, "-o", os.path.join(tmp, "e.npy"), ogg])
        check(r.returncode == 0 and os.path.getsize(os.path.join(tmp, "e.npy")) > 128,
              "cony embed reads OGG")
        av = gst(tmp, "av.webm", "videotestsrc num-buffers=25 ! "
                 "video/x-raw,width=64,height=48,framerate=25/1 ! vp8enc ! m. " + tone
                 + " ! audioconvert ! vorbisenc ! m. webmmux name=m")
        r = run(audio_tag + [av])
        check(r.returncode == 0 and top_labels(r.stdout) == top_labels(ref.stdout),
              "a WebM with video and audio: the audio's windows and labels")
        video = os.path.join(root, "tests", "golden", "imagenet", "photos.webm")
        r = run(audio_tag + [video])
        check(r.returncode == 1 and "photos.webm" in r.stderr
              and "no audio stream found in it" in r.stderr, "a video-only WebM: no audio stream")
        r = run(tag + [ogg])
        check(r.returncode == 1 and "tone.ogg is audio" in r.stderr and "3-channel" in r.stderr
              and "1-channel log-mel" in r.stderr, "OGG for a 3-channel model names the mismatch")

        # 5. truncated audio: what is there, and a warning naming the file
        for name, src in (("cut.ogg", ogg), ("cut.flac", flac)):
            data = open(src, "rb").read()
            r = run(audio_tag + [write(tmp, name, data[:len(data) // 3])])
            n = len(r.stdout.splitlines())
            check(r.returncode == 0 and 0 < n < 20 and name in r.stderr
                  and "truncated" in r.stderr, f"{name}: {n} windows and a warning")

        # 6. cony probe, and pipelines/file.sh through it: a truncated OGG warned about
        cut_ogg = os.path.join(tmp, "cut.ogg")
        r = run([cony, "probe", ogg, cut_ogg, photo])
        lines = r.stdout.splitlines()
        check(r.returncode == 3 and lines[0].endswith("tone.ogg: audio/ogg")
              and "cut.ogg: audio/ogg, truncated: the file ends inside an Ogg page" in lines[1]
              and lines[2].endswith("photo.jpg: image/jpeg, 1200 x 900"),
              "cony probe: types, sizes, truncation, exit 3")
        r = run([cony, "probe", os.path.join(tmp, "huge.png")])
        check(r.returncode == 1 and "65535 x 65535" in r.stderr, "cony probe: huge PNG, exit 1")
        file_sh = os.path.join(root, "pipelines", "file.sh")
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(cony)) + ":"
                   + os.environ["PATH"])
        for path, warned in ((ogg, False), (cut_ogg, True)):
            r = subprocess.run(["bash", file_sh, path], capture_output=True, text=True,
                               timeout=120, env=env)
            print("$ file.sh", os.path.basename(path), "->", r.returncode, r.stderr.strip())
            said = "file.sh: warning: " + path + " is truncated: the file ends" in r.stderr
            check(r.returncode == 0 and r.stdout.strip() != "" and said == warned,
                  f"file.sh {os.path.basename(path)}: results{' and a warning' * warned}")
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
