#!/usr/bin/python3
"""docs/results.schema.json against every JSON output of gst-cony: conyjson lines
(softmax every-step with all scores, on-change, and the sigmoid AudioSet tagger on
change, also with the home groups and the level gate's gated records), pipelines/print_results.py --json (bus messages in both modes, the custom
meta, the sigmoid tagger), pipelines/json.sh, and the examples in docs/elements.md.
Every record must validate; the stream caps come once per stream in conyjson; an
on-change run ends with the "eos" record of the segment EOS closed. (The MQTT payload
is checked against the schema by test_mqtt_publish.py.)

TAP output; skipped (77) without python3-jsonschema.
    test_results_schema.py SOURCE_ROOT VGGISH TRANSFORMER
"""

import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("1..0 # SKIP python3-jsonschema not installed")
    sys.exit(77)

TONE = ("audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=white-noise "
        "! audio/x-raw,format=S16LE,rate=44100,channels=2")
# for the tagger: "Sine wave" stays above 0.2, so EOS closes its segment
SINE = TONE.replace("white-noise", "sine")
# for the level gate: 2 s of a sine at -9 dBFS, then 3 s at -69 dBFS (below min-level=-30)
GATED = ("audiotestsrc num-buffers=10 samplesperbuffer=3200 wave=sine volume=0.5 "
         "! audio/x-raw,rate=16000,channels=1 ! c. "
         "audiotestsrc num-buffers=15 samplesperbuffer=3200 wave=sine volume=0.0005 "
         "! audio/x-raw,rate=16000,channels=1 ! c. concat name=c")


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = False

    def point(self, ok, text, details=()):
        self.n += 1
        self.failed |= not ok
        print(f"{'ok' if ok else 'not ok'} {self.n} {text}")
        for d in list(details)[:5]:
            print(f"# {d}")


def validate(validator, records):
    """Problems: one line per record that does not validate (the first error of each)."""
    problems = []
    for i, r in enumerate(records):
        err = next(iter(validator.iter_errors(r)), None)
        if err is not None:
            problems.append(f"record {i} ({r.get('type')}): {err.message[:160]} "
                            f"at {'/'.join(map(str, err.absolute_path))}")
    return problems


def conyjson(chain, props, src=TONE):
    """Records that gst-launch-1.0 SRC ! ... ! conytransformer PROPS ! conyjson writes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.jsonl")
        cmd = (f"gst-launch-1.0 -q {src} ! audioconvert ! audioresample ! {chain} "
               f"! conytransformer {props} ! conyjson source=tone scores=true "
               f"! filesink location={out}")
        subprocess.run(cmd, shell=True, check=True, timeout=120, stdout=subprocess.DEVNULL)
        return [json.loads(line) for line in open(out, encoding="utf-8")]


def script(root, args):
    """JSON lines a script in pipelines/ prints."""
    proc = subprocess.run(args, cwd=root, check=True, timeout=120, capture_output=True, text=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def doc_examples(root):
    """The JSON objects in the ```json blocks of docs/elements.md's conyjson section
    that have a "type" (the DL Streamer comparison has none)."""
    text = open(os.path.join(root, "docs", "elements.md"), encoding="utf-8").read()
    section = text.split("\n## conyjson", 1)[1].split("\n## ", 1)[0]
    objs = []
    for block in re.findall(r"```json\n(.*?)```", section, re.S):
        dec, pos = json.JSONDecoder(), 0
        while pos < len(block.strip()):
            try:
                obj, end = dec.raw_decode(block, pos)
            except json.JSONDecodeError:
                break
            if "type" in obj:
                objs.append(obj)
            pos = end
            while pos < len(block) and block[pos].isspace():
                pos += 1
    return objs


def main():
    root, vggish, model = sys.argv[1:4]
    schema = json.load(open(os.path.join(root, "docs", "results.schema.json"), encoding="utf-8"))
    tap = Tap()
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        tap.point(True, "docs/results.schema.json is a valid JSON Schema (2020-12)")
    except jsonschema.SchemaError as e:
        tap.point(False, "docs/results.schema.json is not a valid schema", [e.message])
        print(f"1..{tap.n}")
        return 1
    v = jsonschema.Draft202012Validator(schema)
    yamnet = os.path.join(root, "models", "yamnet", "yamnet.safetensors")
    tagger = os.path.join(root, "models", "audioset", "tagger.safetensors")
    home = os.path.join(root, "models", "audioset", "home.groups")
    small = f"conymel ! conyvggish model={vggish}"
    tag_chain = f"conymel preset=yamnet ! conyvggish model={yamnet} output=embedding"
    py = ["/usr/bin/python3", os.path.join(root, "pipelines", "print_results.py"), TONE, "--json"]

    runs = [
        ("conyjson, every step, all scores", lambda: conyjson(small, f"model={model} top-k=2")),
        ("conyjson, on-change", lambda: conyjson(small, f"model={model} message-mode=on-change")),
        ("conyjson, sigmoid tagger on-change", lambda: conyjson(
            tag_chain, f"model={tagger} top-k=3 message-mode=on-change threshold=0.2", SINE)),
        ("conyjson, tagger with the home groups and the level gate (it closes the segments)",
         lambda: conyjson(tag_chain + " min-level=-30", f"model={tagger} top-k=3 "
                          f"message-mode=on-change threshold=0.2 groups-file={home}", GATED)),
        ("print_results.py --json (bus, every step)", lambda: script(
            root, py + ["--vggish", vggish, "--transformer", model])),
        ("print_results.py --json (bus, on-change)", lambda: script(
            root, py + ["--vggish", vggish, "--transformer", model, "--message-mode", "on-change"])),
        ("print_results.py --json --from-meta", lambda: script(
            root, py + ["--vggish", vggish, "--transformer", model, "--from-meta"])),
        ("print_results.py --json (sigmoid tagger, on-change)", lambda: script(
            root, [py[0], py[1], SINE, "--json", "--vggish", yamnet, "--transformer", tagger,
                   "--message-mode", "on-change", "--threshold", "0.2"])),
        ("json.sh", lambda: script(
            root, ["bash", os.path.join(root, "pipelines", "json.sh"), "test", vggish, model])),
        ("docs/elements.md's conyjson examples", lambda: doc_examples(root)),
    ]
    for name, produce in runs:
        try:
            records = produce()
        except (subprocess.SubprocessError, OSError, ValueError) as e:
            tap.point(False, f"{name}: {e}")
            continue
        problems = validate(v, records)
        kinds = [r.get("type") for r in records]
        if "level gate" in name and not any(r.get("gated") for r in records):
            problems.append("no record below the gate")
        if name.startswith("conyjson"):
            if kinds.count("stream") != 1 or kinds[0] != "stream":
                problems.append(f"stream records at {[i for i, k in enumerate(kinds) if k == 'stream']}"
                                " (want one, first)")
        if "on-change" in name and kinds[-1:] != ["eos"]:
            problems.append(f"the last record is {kinds[-1:]}, not the eos record")
        if len(records) < 2:
            problems.append(f"only {len(records)} records")
        summary = ", ".join(f"{kinds.count(k)} {k}" for k in ("stream", "result", "eos") if k in kinds)
        tap.point(not problems, f"{name}: {summary} validate", problems)
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
