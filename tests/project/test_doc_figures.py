#!/usr/bin/python3
"""The figures the docs quote, against what the code says and the scripts print, so that
they cannot drift again (issue 60):

  - docs/elements.md's span of a step of the shipped audio model ("X s for the shipped
    n = N") and its formula's step: `cony info`'s window n and token seconds;
  - README's models table (every "n = N tokens|frames|steps = S s") and run.sh's "S s
    window": `cony info`'s n of the folder's classifier times its step (frontend
    token_seconds, every/fps of a video front end, a fused model's steps per second);
    each model card's first "window n = N";
  - README's train-your-own transcript: its window in seconds is what train_your_own.py
    prints for its n (tests/training/test_readme_recipe.sh runs the recipe and compares);
  - pipelines/README.md's times ("the first audio line says 0.97 s", "one step (0.25 s)
    per line"): pipelines/file.sh's lines on a generated clip;
  - README's `cony` block: every command `cony` lists is there, with the inputs its
    --help names, and a command that takes an image says "image" in `cony`'s list;
  - pipelines/README.md's label delay ("about X to Y s of audio after the sound
    changes", "(N − 1) × 0.25 s later" with min-steps): file.sh on speech (espeak-ng)
    then a steady tone, with min-steps=1 and 4.

    test_doc_figures.py SOURCE_ROOT CONY_TOOL   (GST_PLUGIN_PATH / GST_REGISTRY from meson)
TAP output."""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT, CONY = sys.argv[1], sys.argv[2]
FIRST_TOKEN_SECONDS = 0.975  # the newest YAMNet/VGGish window of the first token
results = []


def check(ok, what):
    results.append((bool(ok), what))


def read(path, lines=False):
    """A file's text; for prose, with its line breaks as spaces (a phrase may be wrapped)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    return text if lines else re.sub(r"\s*\n\s*", " ", text)


def info(path):
    """`cony info` of a classifier: (window n, seconds per step); None for a CNN file."""
    out = subprocess.run([CONY, "info", path], capture_output=True, text=True, check=True).stdout
    n = re.search(r"^window: +n (\d+)", out, re.M)
    if not n:
        return None
    fe = re.search(r"^frontend: +(\{.*\})$", out, re.M)
    fe = json.loads(fe.group(1)) if fe else {}
    fusion = re.search(r"^fusion: +(\d+)/(\d+) steps per second", out, re.M)
    if "token_seconds" in fe:
        step = fe["token_seconds"]
    elif "fps" in fe:
        step = fe.get("every", 1) / fe["fps"]
    elif fusion:
        step = int(fusion.group(2)) / int(fusion.group(1))
    else:
        raise SystemExit(f"{path}: no step length in cony info")
    return int(n.group(1)), step


def classifier_in(folder):
    for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.safetensors"))):
        got = info(path)
        if got:
            return path, got
    raise SystemExit(f"{folder}: no classifier")


def near(a, b):
    return abs(a - b) < 0.006


readme, elements, pipelines_readme = read("README.md", True), read("docs/elements.md"), read("pipelines/README.md")
audio_model, (audio_n, audio_step) = classifier_in("models/audio")

# docs/elements.md: the span of a full window of the shipped audio model.
m = re.search(r"`\[PTS − \(n − 1\) × ([0-9.]+) s, PTS \+ ([0-9.]+) s\)`: ([0-9.]+) s for the shipped n = (\d+)",
              elements)
check(m, "docs/elements.md quotes the shipped audio model's span ('X s for the shipped n = N')")
if m:
    step, first, secs, n = float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
    check(n == audio_n, f"docs/elements.md: shipped n = {n}, cony info: n {audio_n}")
    check(near(step, audio_step) and near(first, FIRST_TOKEN_SECONDS),
          f"docs/elements.md: step {step} s and first window {first} s "
          f"(the model: {audio_step} s, {FIRST_TOKEN_SECONDS} s)")
    want = (audio_n - 1) * audio_step + FIRST_TOKEN_SECONDS
    check(near(secs, want), f"docs/elements.md: {secs} s for a full window, (n - 1) x step + first = {want:.3f} s")

# README's models table: n and its length in seconds, per model folder.
rows = re.findall(r"^\| `(models/[a-z-]+)/` \(([^|]*)\|", readme, re.M)
quoted = 0
for folder, text in rows:
    m = re.search(r"n = (\d+) (?:tokens|frames|steps) = ([0-9.]+) s", text)
    if not m:
        continue
    quoted += 1
    path, (n, step) = classifier_in(folder)
    doc_n, doc_s = int(m.group(1)), float(m.group(2))
    check(doc_n == n and near(doc_s, n * step),
          f"README {folder}: n = {doc_n} = {doc_s} s; cony info {os.path.basename(path)}: "
          f"n {n} x {step:g} s = {n * step:g} s")
check(quoted >= 4, f"README's models table quotes a window for {quoted} models (at least 4)")

# Each model card's first "window n = N" (its description of the shipped file; later
# ones may be experiments').
for card in sorted(glob.glob(os.path.join(ROOT, "models", "*", "MODEL.md"))):
    folder = os.path.relpath(os.path.dirname(card), ROOT)
    quote = re.search(r"window,? n =? ?(\d+)", read(card))
    if quote:
        path, (n, _) = classifier_in(folder)
        check(int(quote.group(1)) == n, f"{folder}/MODEL.md: window n = {quote.group(1)}; cony info "
              f"{os.path.basename(path)}: n {n}")

m = re.search(r"continual encoder with an (\d+(?:\.\d+)?) s window", readme)
check(m and near(float(m.group(1)), audio_n * audio_step),
      f"README (scripts/run.sh's model): '{m.group(0) if m else 'no window quoted'}', "
      f"cony info: {audio_n} x {audio_step} s")

# README's train-your-own transcript: the seconds train_your_own.py prints for its n
# (training/conytrain/audio/own.py: FIRST_TOKEN_SECONDS + (n - 1) * TOKEN_SECONDS).
own = read("training/conytrain/audio/own.py", True)
first_s, token_s = (float(re.search(rf"^{k} = ([0-9.]+)", own, re.M).group(1))
                    for k in ("FIRST_TOKEN_SECONDS", "TOKEN_SECONDS"))
m = re.search(r"window n = (\d+) tokens \(([0-9.]+) s\)", readme)
check(m, "README's train-your-own transcript quotes its window")
if m:
    n, secs = int(m.group(1)), float(m.group(2))
    check(near(secs, first_s + (n - 1) * token_s),
          f"README transcript: n = {n} is {secs} s; train_your_own.py prints "
          f"{first_s + (n - 1) * token_s:.2f} s")

# pipelines/README.md's times against file.sh's lines.
first = re.search(r"the first audio line says ([0-9.]+) s", pipelines_readme)
grows = re.search(r"It grows by one step \(([0-9.]+) s\) per line", pipelines_readme)
check(first and grows, "pipelines/README.md quotes the first line's time and the step")
with tempfile.TemporaryDirectory() as tmp:
    wav = os.path.join(tmp, "tone.wav")
    subprocess.run(["gst-launch-1.0", "-q", "audiotestsrc", "num-buffers=30", "samplesperbuffer=1600",
                    "!", "audio/x-raw,rate=16000,channels=1", "!", "wavenc", "!", "filesink",
                    f"location={wav}"], check=True)
    out = subprocess.run(["bash", os.path.join(ROOT, "pipelines", "file.sh"), wav],
                         capture_output=True, text=True, env=dict(os.environ, CONY_AUDIO_PROBE="off"))
times = [float(t) for t in re.findall(r"^ +([0-9.]+) s  ", out.stdout, re.M)]
check(out.returncode == 0 and len(times) >= 5, f"file.sh on a 3 s tone: exit {out.returncode}, "
      f"{len(times)} lines {out.stderr[-300:]!r}")
if first and grows and len(times) >= 2:
    steps = {round(b - a, 2) for a, b in zip(times, times[1:])}
    check(near(times[0], float(first.group(1))),
          f"pipelines/README.md: first line {first.group(1)} s; file.sh: {times[0]} s")
    check(steps == {float(grows.group(1))}, f"pipelines/README.md: step {grows.group(1)} s; file.sh: {sorted(steps)}")

# pipelines/README.md's label delay on a clip that changes at 4 s: speech, then a steady
# tone (the shipped model's "noise"), the same bytes on every run (espeak-ng, sox -R).
delay = re.search(r"A new label comes about ([0-9.]+) to ([0-9.]+) s of audio after the sound changes",
                  pipelines_readme)
hold = re.search(r"a change is reported once it has held N steps, \(N − 1\) × ([0-9.]+) s later",
                 pipelines_readme)
check(delay and hold, "pipelines/README.md quotes the label delay and what min-steps adds")


def changes(wav, opts):
    r = subprocess.run(["bash", os.path.join(ROOT, "pipelines", "file.sh"), wav], capture_output=True,
                       text=True, env=dict(os.environ, CONY_AUDIO_PROBE="off", CONY_OPTS=opts))
    return [(float(t), label) for t, label in re.findall(r"^ +([0-9.]+) s  (\S+)", r.stdout, re.M)]


with tempfile.TemporaryDirectory() as tmp:
    clip = os.path.join(tmp, "change.wav")
    made = subprocess.run(
        f"espeak-ng -v en-us -s 160 -w {tmp}/s.wav 'This is a short test of the continual "
        f"transformer. It listens to the sound and says what it hears.' && "
        f"sox -R {tmp}/s.wav -r 16000 -c 1 -b 16 {tmp}/s16.wav trim 0 4 && "
        f"sox -R -n -r 16000 -c 1 -b 16 {tmp}/t.wav synth 4 sine 440 vol 0.3 && "
        f"sox -R {tmp}/s16.wav {tmp}/t.wav {clip}", shell=True, capture_output=True).returncode == 0
    if made and delay and hold:
        every1, every4 = changes(clip, "min-steps=1"), changes(clip, "min-steps=4")
        first = [t for t, label in every1 if t > 4 and label != every1[0][1]]
        late = first[0] - 4 if first else None
        check(late is not None and float(delay.group(1)) <= late <= float(delay.group(2)),
              f"pipelines/README.md: a new label {delay.group(1)}-{delay.group(2)} s after the change; "
              f"file.sh, speech then a tone from 4 s: {every1[0][1]} then {first and every1[-1][1]} "
              f"{'%.2f s late' % late if late is not None else 'never'}")
        check(every1 == every4, "min-steps does not change the every-step lines")
        on1 = changes(clip, "message-mode=on-change min-steps=1")
        on4 = changes(clip, "message-mode=on-change min-steps=4")
        step = float(hold.group(1))
        check(len(on1) == len(on4) == 2 and near(on4[1][0] - on1[1][0], 3 * step),
              f"pipelines/README.md: min-steps=4 reports (4 - 1) x {step} s later; file.sh on-change: "
              f"{on1} vs {on4}")
    else:
        check(True, "label delay # SKIP needs espeak-ng and sox")

# README's `cony` block against `cony` and each command's --help.
listing = subprocess.run([CONY], capture_output=True, text=True).stderr + \
    subprocess.run([CONY], capture_output=True, text=True).stdout
block = readme.split("## The `cony` tool", 1)[1].split("\n## ", 1)[0]
for name, desc in re.findall(r"^  ([a-z]+) +(.*)$", listing, re.M):
    usage = subprocess.run([CONY, name, "--help"], capture_output=True, text=True).stdout
    m = re.search(rf"^  {name} \[OPTION\?\] (\S+) - ", usage, re.M)
    lines = [ln for ln in block.splitlines() if ln.startswith(f"cony {name} ")]
    check(lines, f"README's cony block has a 'cony {name}' line")
    if m and lines:
        check(any(m.group(1) in ln for ln in lines),
              f"README 'cony {name}': the inputs {m.group(1)} of `cony {name} --help`")
    if m and "IMAGE" in m.group(1):
        check("image" in desc, f"`cony` lists {name} as '{desc}': it takes images too")

for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} {what}")
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
