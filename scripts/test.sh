#!/usr/bin/env bash
# Sets up, builds and runs every test; the last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }

meson test -C build --num-processes 2 --print-errorlogs "$@"
status=$?

# Count individual test cases (TAP subtests where a test speaks TAP).
/usr/bin/python3 - build/meson-logs/testlog.json <<'PY'
import json, re, sys
passed = failed = skipped = 0
tap = re.compile(r"^(not ok|ok) \d+(.*)$", re.M)
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    t = json.loads(line)
    res = t.get("result", "")
    cases = tap.findall(t.get("stdout") or "")
    if cases:  # a TAP test: count its cases; a crash after them is one more failure
        for status, rest in cases:
            if "# SKIP" in rest:
                skipped += 1
            elif status == "ok" or "# TODO" in rest:
                passed += 1
            else:
                failed += 1
        if res not in ("OK", "EXPECTEDFAIL", "SKIP") and not any(s == "not ok" for s, _ in cases):
            failed += 1
    elif res in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif res == "SKIP":
        skipped += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit $status
