#!/usr/bin/python3
"""CPU of the fused audio-video pipeline against the two single-sense chains on the same
media file (bench/RESULTS.md, "fusion"; issue #41's goal: fused <= singles + 5 %).

usage: GST_PLUGIN_PATH=build/gst bench/av_cpu.py [FILE [ROUNDS]]
       (default tests/golden/av/scenes.webm, 3 rounds)

Runs, interleaved, ROUNDS times each (gst-launch-1.0, sync=false, OPENBLAS_NUM_THREADS=1):
  decode:  filesrc ! decodebin, both streams converted as the chains need, into fakesinks
  singles: the two default single-sense chains side by side in one process: audio
           conymel preset=yamnet ! conyvggish (models/audio's CNN) ! conytransformer
           (models/audio/transformer.safetensors); video conyframeembed (MobileNet-v2
           embedding, 10 fps) ! conytransformer (models/video-tagger/tagger.safetensors)
  fused:   the same CNNs' tokens (YAMNet, MobileNet-v2) into conyfuse ! conytransformer
           with models/av/av.safetensors (pipelines/av_file.sh's chain; since rule 14 of
           models/av/EXPERIMENTS.md, YAMNet mode=continual stride=32)
and prints each run's CPU time (user + system from wait4's rusage: start-up and model
loading included) and that time per second of media. The fused chain's extra cost is
fused - singles; the chains' own cost is each minus decode.
"""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = os.path.join(ROOT, "models")
TOKQ = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=30000000000"
AUDIO = "queue ! audioconvert ! audioresample"
MEL = "conymel preset=yamnet"
VIDEO = "queue ! videoconvert ! videorate ! video/x-raw,framerate=10/1"
MOBILENET = f"conyframeembed model={M}/imagenet/mobilenet_v2.safetensors output=embedding"


def pipelines(path):
    src = f"filesrc location={path} ! decodebin name=d"
    return {
        "decode": f"{src} d. ! {AUDIO} ! fakesink sync=false d. ! {VIDEO} ! fakesink sync=false",
        "singles": (f"{src} d. ! {AUDIO} ! {MEL} ! conyvggish model={M}/audio/yamnet-adapted.safetensors "
                    f"output=embedding ! conytransformer model={M}/audio/transformer.safetensors "
                    f"post-messages=false ! fakesink sync=false d. ! {VIDEO} ! {MOBILENET} ! "
                    f"conytransformer model={M}/video-tagger/tagger.safetensors "
                    f"post-messages=false ! fakesink sync=false"),
        "fused": (f"{src} conyfuse name=fuse model={M}/av/av.safetensors ! conytransformer "
                  f"model={M}/av/av.safetensors post-messages=false ! fakesink sync=false "
                  f"d. ! {AUDIO} ! {MEL} ! conyvggish model={M}/yamnet/yamnet.safetensors "
                  f"output=embedding mode=continual stride=32 ! {TOKQ} ! fuse.sink_audio d. ! {VIDEO} ! {MOBILENET} ! "
                  f"{TOKQ} ! fuse.sink_video"),
    }


def duration(path):
    out = subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!",
                          "decodebin", "!", "audioconvert", "!", "audio/x-raw,format=S16LE,"
                          "channels=1,rate=16000", "!", "filesink", "location=/dev/stdout"],
                         capture_output=True, check=True).stdout
    return len(out) / 2 / 16000


def run(name, line, seconds):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    t0 = time.monotonic()
    proc = subprocess.Popen(["gst-launch-1.0", "-q"] + line.split(), env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    cpu = ru.ru_utime + ru.ru_stime
    print(f"{name:8s} exit {os.waitstatus_to_exitcode(status)}, wall {time.monotonic() - t0:.2f} s, "
          f"CPU {cpu:.3f} s = {100 * cpu / seconds:.2f} % of one core per second of media, "
          f"peak RSS {ru.ru_maxrss / 1024:.1f} MiB", flush=True)
    return cpu


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "golden", "av",
                                                              "scenes.webm")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    seconds = duration(path)
    print(f"{path}: {seconds:.2f} s of media")
    cpu = {k: [] for k in ("decode", "singles", "fused")}
    for _ in range(rounds):
        for name, line in pipelines(path).items():
            cpu[name].append(run(name, line, seconds))
    med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    print("median CPU s: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))
    s, f, d = med["singles"], med["fused"], med["decode"]
    print(f"fused / singles = {f / s:.3f}; without decoding: {(f - d) / (s - d):.3f}")


if __name__ == "__main__":
    main()
