#!/usr/bin/env bash
# test_format.sh SOURCE_ROOT: every C file of the tree is laid out as clang-format writes it
# with the project's .clang-format, so the style is applied once and stays applied (issue 28).
# A failure names each file and its first differing lines; `clang-format -i FILE` mends it.
set -uo pipefail
root=$1
cd "$root" || exit 1
if ! command -v clang-format >/dev/null; then
  echo "not ok 1 clang-format is not installed (scripts/setup.sh installs it)"; exit 1
fi
echo "1..1"
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "# $f differs from clang-format's layout:"
    diff <(clang-format "$f") "$f" | head -6 | sed 's/^/#   /'
    bad=$((bad + 1))
  fi
done < <(find include src gst tools tests -name '*.[ch]' | sort)
if [ "$bad" -eq 0 ]; then
  echo "ok 1 every C file is formatted (.clang-format, $(clang-format --version | grep -o 'version [0-9.]*'))"
else
  echo "not ok 1 $bad C files differ from clang-format's layout"
  exit 1
fi
