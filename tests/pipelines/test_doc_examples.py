#!/usr/bin/python3
"""Every gst-launch-1.0 example in the elements' doc comments (gst/*.c, the |[ ... ]|
blocks) and in docs/elements.md runs, as GStreamer's `level` compiles its example.

A few stand-ins make them runnable here, all listed in STANDINS: a test source for a
device (autoaudiosrc, v4l2src, the microphone devices.py names) and generated files for
the example file names. Two examples are not run here, each with the test that runs
its chain (EXEMPT). An example the test cannot place (a new device, a file name it does
not know) fails, so a new example is either runnable or named here.

    test_doc_examples.py SOURCE_ROOT   (GST_PLUGIN_PATH / GST_REGISTRY from meson)
TAP output."""

import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# a device -> a source of the same media that ends by itself
STANDINS = [
    (re.compile(r"mic=\$\([^)]*\) && "), ""),
    (re.compile(r"\$mic\b"), "audiotestsrc num-buffers=60 wave=pink-noise"),
    (re.compile(r"\bautoaudiosrc\b"), "audiotestsrc num-buffers=60 wave=pink-noise"),
    (re.compile(r"\bv4l2src\b"), "videotestsrc num-buffers=12"),
]
# example file names -> the fixture made for them
FILES = {"a.wav": "a.wav", "long.wav": "long.wav", "/tmp/a.ogg": "a.ogg", "out.jsonl": "out.jsonl"}
# examples not run here, by a word only they contain, and the test that runs their chain
EXEMPT = {
    "conyfuse": "needs a fused model file: test av_pipeline runs pipelines/av_file.sh, "
                "the same chain",
    "conymqttsink": "needs a broker: test mqtt_publish runs conyjson ! conymqttsink against "
                    "a mosquitto on 127.0.0.1",
}


def from_c(path):
    """The gst-launch lines of the |[ ... ]| blocks of a C doc comment."""
    out, block = [], None
    for line in open(path, encoding="utf-8"):
        text = re.sub(r"^\s*\*\s?", "", line.rstrip("\n"))
        if text.startswith("|["):
            block = []
        elif text.startswith("]|") and block is not None:
            out += joined(block)
            block = None
        elif block is not None:
            block.append(text)
    return out


def from_markdown(path):
    """The gst-launch lines of the fenced code blocks of a Markdown file."""
    out, block = [], None
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                out += joined(block)
                block = None
        elif block is not None:
            block.append(line.rstrip("\n"))
    return out


def joined(lines):
    """Lines joined at trailing backslashes; those that run gst-launch-1.0."""
    cmds, cur = [], ""
    for line in lines:
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if "gst-launch-1.0 " in cur and not cur.lstrip().startswith("#"):
            cmds.append(" ".join(cur.split()))
        cur = ""
    return cmds


def runnable(cmd, tmp):
    """The command with its stand-ins, or None with the reason it cannot be placed."""
    for pat, rep in STANDINS:
        cmd = pat.sub(rep, cmd)
    argv = shlex.split(cmd)
    if argv[0] != "gst-launch-1.0":
        return None, f"does not start with gst-launch-1.0 after the stand-ins: {cmd}"
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        if eq and key in ("location", "uri"):
            name = value[len("file://"):] if value.startswith("file://") else value
            if name not in FILES:
                return None, f"unknown example file {value!r}"
            path = os.path.join(tmp, FILES[name])
            argv[i] = f"{key}={'file://' if value.startswith('file://') else ''}{path}"
    return argv, None


def make_fixtures(tmp, env):
    for name, extra, enc in [("a.wav", "num-buffers=30", "wavenc"),
                             ("long.wav", "num-buffers=120", "wavenc"),
                             ("a.ogg", "num-buffers=30", "vorbisenc ! oggmux")]:
        subprocess.run(["gst-launch-1.0", "-q", "audiotestsrc", extra, "wave=pink-noise",
                        "samplesperbuffer=1600", "!", "audio/x-raw,rate=16000,channels=1", "!",
                        "audioconvert", "!", *enc.split(), "!", "filesink",
                        f"location={os.path.join(tmp, name)}"],
                       check=True, env=env, timeout=60)


def main():
    env = dict(os.environ)
    examples = []
    for path in sorted(glob.glob(os.path.join(ROOT, "gst", "*.c"))):
        examples += [(os.path.relpath(path, ROOT), c) for c in from_c(path)]
    examples += [("docs/elements.md", c) for c in from_markdown(os.path.join(ROOT, "docs",
                                                                              "elements.md"))]
    print(f"1..{len(examples) + 1}")
    n, failed = 1, False
    print(f"{'ok' if len(examples) >= 12 else 'not ok'} 1 found {len(examples)} examples")
    failed |= len(examples) < 12
    with tempfile.TemporaryDirectory(prefix="cony-docs-") as tmp:
        make_fixtures(tmp, env)
        for where, cmd in examples:
            n += 1
            exempt = [w for w in EXEMPT if w in cmd]
            if exempt:
                print(f"ok {n} {where}: # SKIP {EXEMPT[exempt[0]]}")
                continue
            argv, why = runnable(cmd, tmp)
            if argv is None:
                print(f"not ok {n} {where}: {why}")
                failed = True
                continue
            try:
                r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=120)
                ok, detail = r.returncode == 0, (r.stdout + r.stderr)[-600:]
            except subprocess.TimeoutExpired:
                ok, detail = False, "timed out after 120 s"
            print(f"{'ok' if ok else 'not ok'} {n} {where}: {' '.join(argv)[:150]}")
            if not ok:
                print("# " + detail.replace("\n", "\n# "))
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
