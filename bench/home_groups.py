#!/usr/bin/python3
"""How the shipped AudioSet home groups (models/audioset/home.groups) label real
recordings: each FILE=GROUP runs through YAMNet and the continual AudioSet tagger with
groups-file (the model's scores folded to the groups, the rest "other") and prints the
share of steps whose top label is GROUP, the share where GROUP's score reaches 0.2, and
GROUP's highest score. A check of the file, never a tuning loop: record the table, do not
edit the groups to raise it.

    GST_PLUGIN_PATH=build/gst bench/home_groups.py FILE=GROUP ...
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def steps(path):
    m = os.path.join(ROOT, "models")
    cmd = ["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!", "decodebin", "!",
           "audioconvert", "!", "audioresample", "!", "conymel", "preset=yamnet", "!",
           "conyvggish", f"model={m}/yamnet/yamnet.safetensors", "output=embedding", "!",
           "conytransformer", f"model={m}/audioset/tagger.safetensors",
           f"groups-file={m}/audioset/home.groups", "post-messages=false", "!", "conyjson",
           "scores=true", "!", "fdsink"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout
    return [r for r in map(json.loads, out.splitlines()) if r["type"] == "result"]


def groups():
    """The reported labels in order: the file's groups (no listen list), then other."""
    names = []
    for line in open(os.path.join(ROOT, "models", "audioset", "home.groups"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split("=", 1)[0].strip())
    return names + ["other"]


def main():
    print("| recording | group | steps | top label | score >= 0.2 | highest score |")
    print("|---|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        path, group = arg.rsplit("=", 1)
        rs = steps(path)
        idx = groups().index(group)
        top_hits = hits = 0
        best = 0.0
        for r in rs:
            top_hits += r["label"] == group
            s = r["scores"][idx]
            hits += s >= 0.2
            best = max(best, s)
        n = max(len(rs), 1)
        print(f"| {os.path.basename(path)} | {group} | {len(rs)} | {100 * top_hits / n:.0f} % "
              f"| {100 * hits / n:.0f} % | {best:.2f} |")


if __name__ == "__main__":
    main()
