#!/usr/bin/python3
"""The `cony` CLI on hostile input (#31.2, #31.3): never a NaN result, never a crash.

usage: test_cli_hostile.py CONY_TOOL MODEL.safetensors (a golden model with d_in = 6)

- `cony classify` on tokens whose step overflows the model (FLT_MAX) exits 1 with a
  message naming the step, and writes no output file; the same tokens without that
  row classify (exit 0).
- `cony attention` likewise for a layer's non-finite output.
- `cony mel` on a 1 Hz WAV exits 1 naming the rate (it once asked for n x 16000 samples).
Only the standard library: the .npy and .wav files are written by hand."""
import os
import struct
import subprocess
import sys
import tempfile
import wave

FLT_MAX = 3.4028234663852886e38


def write_npy(path, rows):
    cols = len(rows[0])
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), cols)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for r in rows:
            f.write(struct.pack("<%df" % cols, *r))


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    print("$", " ".join(args), "->", r.returncode, r.stderr.strip())
    return r


def main():
    cony, model = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = [[((t * 7 + k * 3) % 11) / 5.0 - 1.0 for k in range(6)] for t in range(8)]
        tokens = os.path.join(tmp, "tokens.npy")
        out = os.path.join(tmp, "logits.npy")
        write_npy(tokens, plain)
        if run([cony, "classify", "--model", model, tokens, "-o", out]).returncode != 0:
            failures.append("plain tokens were not classified")
        os.remove(out)

        hostile = plain[:3] + [[FLT_MAX] * 6] + plain[3:]
        write_npy(tokens, hostile)
        r = run([cony, "classify", "--model", model, tokens, "-o", out])
        if r.returncode != 1:
            failures.append("classify with a FLT_MAX token exited %d, expected 1" % r.returncode)
        if "step 3" not in r.stderr or "non-finite logits" not in r.stderr:
            failures.append("classify did not name step 3 and the non-finite logits: %r" % r.stderr)
        if os.path.exists(out):
            failures.append("classify wrote %s despite the non-finite step" % out)

        # cony attention: the same rule for a layer's outputs
        weights = os.path.join(os.path.dirname(model), "..", "attention", "regular-single-d8h2n6",
                               "weights.safetensors")
        write_npy(tokens, [[1.0] * 8, [FLT_MAX] * 8, [0.5] * 8])
        r = run([cony, "attention", "--weights", weights, "--variant", "regular", "--heads", "2",
                 "--window", "6", tokens, "-o", out])
        if r.returncode != 1 or "step 1" not in r.stderr or os.path.exists(out):
            failures.append("cony attention on a FLT_MAX token: exit %d, %r" % (r.returncode, r.stderr))
        write_npy(tokens, [[1.0] * 8, [0.5] * 8])
        if run([cony, "attention", "--weights", weights, "--variant", "regular", "--heads", "2",
                "--window", "6", tokens, "-o", out]).returncode != 0:
            failures.append("cony attention on plain tokens failed")

        wav = os.path.join(tmp, "1hz.wav")
        with wave.open(wav, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(1)
            w.writeframes(b"\x00\x01" * 50000)
        r = run([cony, "mel", wav, "-o", os.path.join(tmp, "mel.npy")])
        if r.returncode != 1 or "sample rate 1 Hz out of range" not in r.stderr:
            failures.append("cony mel on a 1 Hz WAV: exit %d, %r" % (r.returncode, r.stderr))
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else "%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
