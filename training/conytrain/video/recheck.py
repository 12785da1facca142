"""Re-checks the shipped video tagger (models/video-tagger/) on the embeddings the current
MobileNet file gives (e.g. after it gained the integer path), without retraining:

  GST_PLUGIN_PATH=build/gst /usr/bin/python3 training/recheck_video_tagger.py \\
      --photos-npy OLD_WORK/photos --old OLD_WORK/seq --work NEW_WORK

OLD_WORK: the work folder of training/train_video_tagger.py (its decoded photographs,
photos/*.npy, and its sequences' shots and embeddings, seq/*.json and *.emb.npy). The
val and test sequences are made again with the same seed (their shots must equal the old
ones), embedded through conyframeembed with the current --cnn (precision auto), and
evaluated as the training script's eval stage does (NEW_WORK/eval-*.json and tables);
it prints how far the new embeddings are from the old ones and how often the per-frame
MobileNet's top-1 stays the same. models/video-tagger/MODEL.md records the result."""

import argparse
import json
import os
import sys

import numpy as np

from conytrain import REPO, safetensors_io
from conytrain.video import camera
from conytrain.video import tagger as T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos-npy", required=True, help="the old work folder's photos/")
    ap.add_argument("--old", required=True, help="the old work folder's seq/")
    ap.add_argument("--work", required=True, help="new work folder (made)")
    ap.add_argument("--cnn", default=os.path.join(REPO, "models", "imagenet",
                                                  "mobilenet_v2.safetensors"))
    ap.add_argument("--models", default=os.path.join(REPO, "models", "video-tagger"))
    ap.add_argument("--cony", default=os.path.join(REPO, "build", "tools", "cony"))
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--frames-per-sequence", type=int, default=240)
    args = ap.parse_args()
    os.makedirs(os.path.join(args.work, "seq"), exist_ok=True)
    link = os.path.join(args.work, "photos")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(args.photos_npy), link)
    every = T.seq_paths
    T.seq_paths = lambda a, split: [] if split == "train" else every(a, split)
    for k, split in enumerate(("train", "val", "test")):   # k: the training script's seeds
        for i, base in enumerate(T.seq_paths(args, split)):
            if os.path.exists(base + ".json"):
                continue
            frames, shots = camera.sequence(T.load_photos(args, split), args.frames_per_sequence,
                                            np.random.default_rng([args.seed, k, i]))
            frames.tofile(base + ".rgb")
            with open(base + ".json", "w") as f:
                json.dump({"frames": len(frames), "shots": shots}, f)
    T.stage_embed(args)
    worst, same, n = 0.0, 0, 0
    for split in ("val", "test"):
        for base in T.seq_paths(args, split):
            old = os.path.join(args.old, os.path.basename(base))
            with open(base + ".json") as f, open(old + ".json") as g:
                if json.load(f) != json.load(g):
                    sys.exit(f"{base}: shots differ from {old}: not the same sequence")
            worst = max(worst, float(np.abs(np.load(base + ".emb.npy")
                                            - np.load(old + ".emb.npy")).max()))
            a = np.load(base + ".scores.npy").astype(np.float32).argmax(1)
            b = np.load(old + ".scores.npy").astype(np.float32).argmax(1)
            same, n = same + int((a == b).sum()), n + len(a)
    print(f"embeddings: max |new - old| {worst:.4f}; per-frame MobileNet top-1 unchanged on "
          f"{same}/{n} frames")
    labels = json.loads(safetensors_io.load(args.cnn)[1]["labels"])
    path = os.path.join(args.models, "tagger.safetensors")
    T.stage_eval(args, labels, path, "val")
    T.stage_eval(args, labels, path, "test")


if __name__ == "__main__":
    main()
