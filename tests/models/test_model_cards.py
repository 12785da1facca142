"""The figures in the shipped models' cards (models/*/MODEL.md) are what `cony info` and
the files say: every "N parameters" is the parameter count of a model file in that
folder, every "N bytes of state" / "N bytes of carried state" the state a classifier
there carries between steps, and every other "N bytes" (N >= 10,000) the size of one of
its files or that state.
Run by meson with CONY_TOOL and CONY_SOURCE_ROOT."""

import glob
import os
import re
import subprocess
import sys

ROOT = os.environ.get("CONY_SOURCE_ROOT", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOOL = os.environ.get("CONY_TOOL", os.path.join(ROOT, "build", "tools", "cony"))


def number(text):
    return int(text.replace(",", ""))


def info(path):
    """(parameters, state bytes or None) from `cony info`."""
    out = subprocess.run([TOOL, "info", path], capture_output=True, text=True, check=True).stdout
    params = re.search(r"^parameters: +(\d+)", out, re.M) or re.search(r"^(\d+) parameters,", out, re.M)
    state = re.search(r"^state: +(\d+) bytes", out, re.M)
    return int(params.group(1)), int(state.group(1)) if state else None


def main():
    failures, checked = [], 0
    for card in sorted(glob.glob(os.path.join(ROOT, "models", "*", "MODEL.md"))):
        folder = os.path.dirname(card)
        files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
        params, states = set(), set()
        for f in files:
            p, s = info(f)
            params.add(p)
            if s is not None:
                states.add(s)
        sizes = {os.path.getsize(f) for f in files}
        text = open(card, encoding="utf-8").read()
        name = os.path.relpath(card, ROOT)
        for m in re.finditer(r"(\d[\d,]*) parameters", text):
            checked += 1
            if number(m.group(1)) not in params:
                failures.append(f"{name}: '{m.group(0)}' is no file's count ({sorted(params)})")
        for m in re.finditer(r"(\d[\d,]*) bytes( of (?:carried )?state)?", text):
            n = number(m.group(1))
            if m.group(2):
                checked += 1
                if n not in states:
                    failures.append(f"{name}: '{m.group(0)}', cony info says {sorted(states)}")
            elif n >= 10000:
                checked += 1
                if n not in sizes | states:
                    failures.append(f"{name}: '{m.group(0)}' is no file's size ({sorted(sizes)})")
    for f in failures:
        print(f"FAIL {f}")
    print(f"{checked} figures checked, {len(failures)} wrong")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
