#!/usr/bin/python3
"""Licences: COPYING at the root is the LGPL 2.1 that meson's project() and the plugin
registration claim; every shipped model folder (a folder of models/ with a .safetensors
file) has a NOTICE whose "Licences (SPDX)" section gives an SPDX expression for every
file in the folder and whose "Derived from:" section says where each .safetensors file
comes from; every licence named has its text in the tree (or is a Creative Commons
licence named by URL); the README's licence section names every model folder.

TAP output.
    test_model_licences.py SOURCE_ROOT
"""

import os
import re
import sys

# SPDX id -> where its text is, relative to the root (None: the NOTICE gives its URL)
TEXTS = {
    "LGPL-2.1-or-later": "COPYING",
    "Apache-2.0": "models/yamnet/LICENSE",
    "CC-BY-SA-4.0": None,
}
NOT_LICENSED = {"NOTICE", "LICENSE", ".gitattributes"}


def sections(notice):
    """{"Licences (SPDX), per shipped file:": [lines], "Derived from:": [lines]}: the
    indented lines under each unindented heading ending in ':'."""
    out, current = {}, None
    for line in notice.splitlines():
        if line and not line[0].isspace():
            current = line if line.endswith(":") else None
            if current:
                out[current] = []
        elif current and line.strip():
            out[current].append(line.strip())
    return out


def check_folder(root, folder):
    """A list of problems with models/@folder's licence statement."""
    path = os.path.join(root, "models", folder)
    notice_path = os.path.join(path, "NOTICE")
    if not os.path.isfile(notice_path):
        return ["no NOTICE"]
    secs = sections(open(notice_path, encoding="utf-8").read())
    licences = secs.get("Licences (SPDX), per shipped file:")
    derived = " ".join(secs.get("Derived from:", []))
    if licences is None:
        return ["NOTICE has no 'Licences (SPDX), per shipped file:' section"]
    problems, covered = [], set()
    for line in licences:
        m = re.fullmatch(r"([^:]+): (.+)", line)
        if not m:
            problems.append(f"licence line {line!r} is not 'FILES: SPDX-EXPRESSION'")
            continue
        ids = re.split(r" (?:AND|OR) ", m.group(2))
        for spdx in ids:
            if spdx not in TEXTS:
                problems.append(f"{spdx!r} is not a licence this test knows the text of")
            elif TEXTS[spdx] and not os.path.isfile(os.path.join(root, TEXTS[spdx])):
                problems.append(f"{spdx}: its text {TEXTS[spdx]} is missing")
        covered.update(f.strip() for f in m.group(1).split(","))
    files = set(os.listdir(path)) - NOT_LICENSED
    if files - covered:
        problems.append(f"no licence stated for {sorted(files - covered)}")
    if covered - files - {"NOTICE"}:
        problems.append(f"licences stated for files that are not there: {sorted(covered - files)}")
    for f in sorted(x for x in files if x.endswith(".safetensors")):
        if f + ":" not in derived and f + "," not in derived:
            problems.append(f"'Derived from:' does not say where {f} comes from")
    return problems


def main():
    root = sys.argv[1]
    n, failed = 0, False

    def point(ok, text, details=()):
        nonlocal n, failed
        n += 1
        failed |= not ok
        print(f"{'ok' if ok else 'not ok'} {n} {text}")
        for d in details:
            print(f"# {d}")

    copying = open(os.path.join(root, "COPYING"), encoding="utf-8").read() \
        if os.path.isfile(os.path.join(root, "COPYING")) else ""
    meson = open(os.path.join(root, "meson.build"), encoding="utf-8").read()
    plugin = open(os.path.join(root, "gst", "plugin.c"), encoding="utf-8").read()
    point("GNU LESSER GENERAL PUBLIC LICENSE" in copying and "Version 2.1" in copying
          and "license : 'LGPL-2.1-or-later'" in meson and '"LGPL", GST_PACKAGE_NAME' in plugin,
          "COPYING is the LGPL 2.1 that meson.build (LGPL-2.1-or-later) and plugin.c (LGPL) claim")

    models = os.path.join(root, "models")
    folders = sorted(d for d in os.listdir(models)
                     if os.path.isdir(os.path.join(models, d))
                     and any(f.endswith(".safetensors") for f in os.listdir(os.path.join(models, d))))
    point(len(folders) >= 4, f"{len(folders)} shipped model folders: {', '.join(folders)}")
    for folder in folders:
        problems = check_folder(root, folder)
        point(not problems, f"models/{folder}/NOTICE states every file's licence and origin",
              problems)

    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Licence\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    missing = [f for f in folders if m is None or f"models/{f}/" not in m.group(1)]
    point(m is not None and "COPYING" in m.group(1) and not missing,
          "README's '## Licence' names COPYING and every model folder",
          [f"not named: {missing}"] if m and missing else [])
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
