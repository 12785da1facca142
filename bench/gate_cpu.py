#!/usr/bin/python3
"""CPU of the default audio chain with and without the level gate (conyvggish min-level)
on a stream that is quiet 90 % of the time (bench/RESULTS.md, "level gate").

usage: GST_PLUGIN_PATH=build/gst bench/gate_cpu.py [SECONDS [MIN_LEVEL [ROUNDS]]]
       (default 300 s, -50 dBFS, 3 rounds)

The stream (16 kHz mono, seeded): pink-ish noise at -70 dBFS, and every 20 s an event of
2 s (a 1 kHz beep pattern and noise at -15 dBFS): 10 % of the time loud. Each round runs,
alternating, the shipped default chain (conymel preset=yamnet ! conyvggish
yamnet-adapted ! conytransformer models/audio, post-messages=false, a file read as fast as
it goes) without and with min-level, over the whole file and over its first second (the
start-up: model loading), and prints the CPU time (user + system, wait4's rusage) of the
whole file minus the start-up's, per second of audio: the share of one core a live stream
would take. OPENBLAS_NUM_THREADS=1, as in `cony bench pipeline`."""
import os
import statistics
import subprocess
import sys
import tempfile
import wave

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = 16000


def make_stream(path, seconds):
    rng = np.random.default_rng(56)
    x = rng.standard_normal(seconds * RATE)
    x = np.convolve(x, np.ones(8) / 8, mode="same")  # a softer, pinker noise
    x *= 10 ** (-70 / 20) / np.sqrt(np.mean(x ** 2))
    t = np.arange(2 * RATE) / RATE
    beep = 0.5 * np.sin(2 * np.pi * 1000 * t) * ((t * 4) % 1 < 0.5)
    event = beep + 0.1 * rng.standard_normal(len(t))
    event *= 10 ** (-15 / 20) / np.sqrt(np.mean(event ** 2))
    for start in range(5, seconds - 2, 20):
        x[start * RATE:(start + 2) * RATE] += event
    loud = sum(1 for s in range(5, seconds - 2, 20)) * 2 / seconds
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
    return loud


def cpu(path, gate):
    m = os.path.join(ROOT, "models", "audio")
    pipeline = (f"filesrc location={path} ! wavparse ! audioconvert ! audioresample "
                f"! conymel preset=yamnet ! conyvggish model={m}/yamnet-adapted.safetensors "
                f"output=embedding{gate} ! conytransformer model={m}/transformer.safetensors "
                "post-messages=false ! fakesink")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(["gst-launch-1.0", "-q"] + pipeline.split(), env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"gst-launch-1.0 failed: {pipeline}")
    return ru.ru_utime + ru.ru_stime


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    level = float(sys.argv[2]) if len(sys.argv) > 2 else -50.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory() as tmp:
        full, short = os.path.join(tmp, "full.wav"), os.path.join(tmp, "short.wav")
        loud = make_stream(full, seconds)
        make_stream(short, 1)
        print(f"{seconds} s stream, {100 * loud:.0f} % loud; min-level={level:g} dBFS; "
              f"{rounds} round(s)")
        shares = {"off": [], "gate": []}
        for r in range(rounds):
            for name, gate in (("off", ""), ("gate", f" min-level={level:g}")):
                total, start = cpu(full, gate), cpu(short, gate)
                share = 100 * (total - start) / seconds
                shares[name].append(share)
                print(f"round {r + 1} {name:4}: CPU {total:.3f} s, start-up {start:.3f} s: "
                      f"{share:.3f} % of one core")
        off, on = statistics.median(shares["off"]), statistics.median(shares["gate"])
        print(f"median: without the gate {off:.3f} % of one core, with it {on:.3f} % "
              f"({100 * (1 - on / off):.0f} % less)")


if __name__ == "__main__":
    main()
