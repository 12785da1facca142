#!/usr/bin/python3
"""The logs open with a summary a newcomer can read (issue 55 item 6), and it stays true:

  - every models/*/EXPERIMENTS.md and bench/RESULTS.md starts (first "## " heading) with
    "## Current summary", at most 40 lines;
  - an EXPERIMENTS.md summary's first table quotes the model cards: each of its decimal
    figures is in the MODEL.md of its folder or of a models/NAME/ folder the summary names;
  - bench/RESULTS.md's summary has a "### Current figures" table for Zen 5, Zen 3 and
    arm64; each Zen row is figure | value | date (YYYY-MM-DD, or empty when not measured
    yet) | source entry, and the source entry is a heading of the file ("SECTION: PART" for
    a part of a section).

    test_log_summaries.py SOURCE_ROOT      (exit status 1 and one line per problem)"""

import glob
import os
import re
import sys

MAX_LINES = 40


def summary_of(path):
    """The lines of @path's first "## " section, which must be its current summary."""
    lines = open(path, encoding="utf-8").read().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not starts or not lines[starts[0]].startswith("## Current summary"):
        raise ValueError("the first '## ' heading is not '## Current summary'")
    end = starts[1] if len(starts) > 1 else len(lines)
    body = lines[starts[0]:end]
    while body and not body[-1].strip():
        body.pop()
    if len(body) > MAX_LINES:
        raise ValueError(f"the summary has {len(body)} lines (at most {MAX_LINES})")
    return body


def tables(lines):
    """[(heading above it, [row cells])] of the markdown tables in @lines."""
    out, heading, rows = [], "", None
    for line in lines + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if rows is None:
                rows = []
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
            continue
        if rows is not None:
            out.append((heading, rows))
            rows = None
        if line.startswith("#"):
            heading = line
    return out


def check_experiments(root, path, body):
    folder = os.path.dirname(path)
    cards = [os.path.join(folder, "MODEL.md")]
    for name in re.findall(r"models/([a-z0-9-]+)/", "\n".join(body)):
        cards.append(os.path.join(root, "models", name, "MODEL.md"))
    text = "".join(open(c, encoding="utf-8").read() for c in cards if os.path.isfile(c))
    found = tables(body)
    if not found:
        return ["no figure table in the summary"]
    problems = []
    for row in found[0][1][1:]:
        for cell in row[1:]:
            for number in re.findall(r"\d+\.\d+", cell):
                if number not in text:
                    problems.append(f"{number} ({row[0]}) is in no model card it quotes")
    return problems


def check_results(path, body):
    lines = open(path, encoding="utf-8").read().split("\n")
    h2 = [line[3:].lower() for line in lines if line.startswith("## ")]
    h3 = [line[4:].lower() for line in lines if line.startswith("### ")]

    def is_heading(source):
        s = source.lower()
        if any(s in h for h in h2 + h3):
            return True
        section, _, part = s.partition(": ")
        return bool(part) and any(h.startswith(section) for h in h2) and any(part in h for h in h3)

    problems = []
    figures = [(h, rows) for h, rows in tables(body) if h.startswith("### Current figures")]
    for kind in ("Zen 5", "Zen 3", "arm64"):
        if not any(kind in h for h, _ in figures):
            problems.append(f"no '### Current figures' table for {kind}")
    for heading, rows in figures:
        if "Zen" not in heading:
            continue
        if [c.lower() for c in rows[0]] != ["figure", "value", "date", "source entry"]:
            problems.append(f"{heading}: columns {rows[0]}, expected figure, value, date, source entry")
            continue
        for row in rows[1:]:
            if len(row) != 4:
                problems.append(f"{heading}: row {row[0]!r} has {len(row)} cells")
                continue
            if row[2] and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", row[2]):
                problems.append(f"{heading}: row {row[0]!r}: date {row[2]!r}")
            if not row[3] or not is_heading(row[3]):
                problems.append(f"{heading}: row {row[0]!r}: source {row[3]!r} is no heading")
    return problems


def main(root):
    logs = sorted(glob.glob(os.path.join(root, "models", "*", "EXPERIMENTS.md")))
    logs.append(os.path.join(root, "bench", "RESULTS.md"))
    if len(logs) < 5:
        print(f"expected at least four EXPERIMENTS.md under {root}/models")
        return 1
    failed = 0
    for path in logs:
        name = os.path.relpath(path, root)
        try:
            body = summary_of(path)
        except ValueError as e:
            problems = [str(e)]
        else:
            problems = (check_results(path, body) if name.startswith("bench")
                        else check_experiments(root, path, body))
        for p in problems:
            print(f"{name}: {p}")
        failed += bool(problems)
    print(f"{len(logs) - failed} of {len(logs)} logs open with a good summary")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
