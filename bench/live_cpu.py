#!/usr/bin/python3
"""CPU used by a live audio pipeline, measured (bench/RESULTS.md, "live CPU").

usage: GST_PLUGIN_PATH=build/gst bench/live_cpu.py [--chain-only] [SECONDS [TRANSFORMER [STREAMS]]]
       (default 60 s, models/audio/transformer.safetensors, 1 stream; --chain-only: leave
       out the run of the source alone)

Runs, one after the other, for SECONDS of live audio each (audiotestsrc is-live=true,
pink noise, 16 kHz mono F32, 0.1 s buffers, stopped by num-buffers):
  chain:  src ! audioconvert ! audioresample ! conymel ! conyvggish ! conytransformer
          post-messages=false ! fakesink   (the shipped models/audio classifier, or
          TRANSFORMER, with the CNN and settings its config names, as pipelines/ do)
  source: src ! fakesink                    (the live source alone)
and prints each gst-launch-1.0 process's wall time and CPU time (user + system, from
wait4's rusage, so start-up and model loading are included), the share of one core,
and the peak resident memory. OPENBLAS_NUM_THREADS=1, as in `cony bench pipeline`.
With STREAMS > 1 the chain run holds that many independent live chains (each its own
source and models) in one gst-launch-1.0 process: the CPU a core spends per live stream,
start-up included; run it again with a short SECONDS and subtract to leave start-up out."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "pipelines"))
from print_results import default_cnn, token_props  # noqa: E402


def run(name, pipeline):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    t0 = time.monotonic()
    proc = subprocess.Popen(["gst-launch-1.0", "-q"] + pipeline.split(), env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    cpu = ru.ru_utime + ru.ru_stime
    print("%-6s exit %d, wall %.2f s, CPU %.3f s (user %.3f, sys %.3f) = %.2f %% of one core, "
          "peak RSS %.1f MiB" % (name, os.waitstatus_to_exitcode(status), wall, cpu, ru.ru_utime,
                                 ru.ru_stime, 100 * cpu / wall, ru.ru_maxrss / 1024))
    return os.waitstatus_to_exitcode(status)


def main():
    chain_only = "--chain-only" in sys.argv
    if chain_only:
        sys.argv.remove("--chain-only")
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tf = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "models", "audio",
                                                            "transformer.safetensors")
    streams = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    mel, cnn = token_props(tf)
    src = ("audiotestsrc is-live=true wave=pink-noise samplesperbuffer=1600 num-buffers=%d "
           "! audio/x-raw,format=F32LE,rate=16000,channels=1" % round(seconds * 10))
    chain = (src + " ! audioconvert ! audioresample ! conymel %s ! conyvggish model=%s %s "
             "! conytransformer model=%s post-messages=false ! fakesink"
             % (mel, default_cnn(tf), cnn, tf))
    rc = run("chain" if streams == 1 else "chain×%d" % streams, " ".join([chain] * streams))
    if not chain_only:
        rc |= run("source", src + " ! fakesink")
    return rc


if __name__ == "__main__":
    sys.exit(main())
