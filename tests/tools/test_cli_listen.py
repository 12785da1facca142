#!/usr/bin/python3
"""`cony classify --listen / --ignore / --groups-file` (issue 56): the scores it writes are
the fold of the plain run's logits (softmax, then a group's max or sum, the rest in
"other"), the reported labels on stdout; the shipped groups files parse against the models
they name (models/audioset/home.groups: the AudioSet tagger; models/imagenet/home.groups:
the ImageNet video tagger); a model label the model lacks is an error naming the line.

TAP output.
    test_cli_listen.py CONY_TOOL SOURCE_ROOT SMALL_TRANSFORMER (d_in 128; speech, music,
                       noise, silence)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

n = 0
failed = False


def point(ok, text, details=""):
    global n, failed
    n += 1
    failed |= not ok
    print(f"{'ok' if ok else 'not ok'} {n} {text}")
    if not ok and details:
        print("# " + str(details).replace("\n", "\n# "))


def classify(cony, model, tokens, out, *extra):
    return subprocess.run([cony, "classify", "--model", model, tokens, "-o", out, *extra],
                          capture_output=True, text=True, timeout=120)


def main():
    cony, root, small = sys.argv[1:4]
    rng = np.random.default_rng(56)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.npy")
        np.save(tokens, rng.uniform(-2, 2, (20, 128)).astype(np.float32))
        logits_path, out = os.path.join(tmp, "logits.npy"), os.path.join(tmp, "out.npy")
        r = classify(cony, small, tokens, logits_path)
        point(r.returncode == 0 and r.stdout == "", "plain classify writes logits, prints nothing",
              r.stderr)
        logits = np.load(logits_path).astype(np.float64)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        groups = os.path.join(tmp, "g.groups")
        open(groups, "w").write("# mine\nloud = music; noise\n")

        cases = [
            ("groups, listen, other", ["--groups-file", groups, "--listen", "loud;speech",
                                       "--other-label", "rest"],
             ["loud", "speech", "rest"], np.stack([p[:, 1:3].max(1), p[:, 0], p[:, 3]], 1)),
            ("group-score sum", ["--groups-file", groups, "--group-score", "sum"],
             ["loud", "other"], np.stack([p[:, 1] + p[:, 2], p[:, 0] + p[:, 3]], 1)),
            ("ignore, no other", ["--ignore", "silence", "--other-label", ""],
             ["speech", "music", "noise"], p[:, :3]),
        ]
        for name, args, labels, want in cases:
            r = classify(cony, small, tokens, out, *args)
            got = np.load(out) if r.returncode == 0 else None
            ok = (r.returncode == 0 and r.stdout.split("\n")[:-1] == labels
                  and got.shape == want.shape and np.abs(got - want).max() < 1e-6)
            point(ok, f"{name}: labels {labels}, scores the fold of the logits",
                  r.stderr + r.stdout)

        open(groups, "w").write("loud = music; noise\nquiet = Silence\n")
        r = classify(cony, small, tokens, out, "--groups-file", groups)
        point(r.returncode == 1 and "g.groups, line 2: the group 'quiet' names 'Silence'" in r.stderr
              and "did you mean 'silence'?" in r.stderr, "an unknown model label names its line",
              r.stderr)
        r = classify(cony, small, tokens, out, "--listen", "bark")
        point(r.returncode == 1 and "listen: 'bark' is neither" in r.stderr,
              "an unknown listened label is named", r.stderr)

        shipped = [("audioset", os.path.join(root, "models", "audioset", "tagger.safetensors"), 1024,
                    ["bark", "smoke_alarm", "glass_break", "baby_cry", "scream", "speech",
                     "doorbell", "knock", "siren", "car_horn", "other"]),
                   ("imagenet", os.path.join(root, "models", "video-tagger", "tagger.safetensors"),
                    1280, ["dog", "cat", "bird", "vehicle", "bicycle", "other"])]
        for folder, model, d, labels in shipped:
            t = os.path.join(tmp, f"{folder}.npy")
            np.save(t, rng.uniform(-1, 1, (4, d)).astype(np.float32))
            r = classify(cony, model, t, out, "--groups-file",
                         os.path.join(root, "models", folder, "home.groups"))
            point(r.returncode == 0 and r.stdout.split("\n")[:-1] == labels,
                  f"models/{folder}/home.groups parses against {os.path.basename(model)}: "
                  f"{len(labels)} labels", r.stderr + r.stdout)
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
