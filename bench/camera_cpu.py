#!/usr/bin/env python3
"""The camera pipeline's CPU share at 10 fps (issue #40): a 640x480 videotestsrc at
10 fps standing in for a camera, videoconvert, videorate, conyframeembed with the
shipped ImageNet MobileNet-v2 (output=embedding) and conytransformer with the video
tagger; the gst-launch process's CPU time (wait4, start-up included) over the stream's
30 s. Usage: camera_cpu.py [--precision auto|float|int8] [--label TEXT]
(GST_PLUGIN_PATH chooses the plugin build)."""
import argparse
import os
import subprocess
import time

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--precision", default="auto", choices=["auto", "float", "int8"])
ap.add_argument("--label", default=None)
a = ap.parse_args()
pipe = ("videotestsrc is-live=true num-buffers=300 ! video/x-raw,width=640,height=480,"
        "framerate=10/1 ! videoconvert ! videorate ! video/x-raw,framerate=10/1 ! "
        "conyframeembed model=models/imagenet/mobilenet_v2.safetensors output=embedding "
        f"precision={a.precision} ! conytransformer "
        "model=models/video-tagger/tagger.safetensors post-messages=false ! fakesink")
t0 = time.monotonic()
proc = subprocess.Popen(["gst-launch-1.0", "-q"] + pipe.split())
_, st, ru = os.wait4(proc.pid, 0)
wall = time.monotonic() - t0
cpu = ru.ru_utime + ru.ru_stime
# 300 frames are 30 s of stream: CPU / 30 s is the share of a core the camera costs
# (start-up included); CPU / wall is lower when the loaded machine stretches the run
print(f"{a.label or 'camera pipeline'} precision={a.precision}: exit "
      f"{os.waitstatus_to_exitcode(st)}, 300 frames at 10 fps, CPU {cpu:.2f} s = "
      f"{1000 * cpu / 300:.1f} ms per frame = {100 * cpu / 30:.1f} % of one core at 10 fps "
      f"(wall {wall:.2f} s, CPU / wall {100 * cpu / wall:.1f} %)", flush=True)
