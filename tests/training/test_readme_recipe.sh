#!/usr/bin/env bash
# README's "Train your own classes" recipe, run as written (in a scratch directory holding
# links to training/, pipelines/ and models/; train_your_own.py is told where `cony` is),
# and its transcript ("#   ..." lines, "..." standing for any text) found in what it
# printed: the window, the classes and the accuracy the README quotes are what a run gives.
# Skipped without python3-torch. Needs GST_PLUGIN_PATH (the build tree's gst/).
#   test_readme_recipe.sh SOURCE_ROOT CONY_TOOL
set -uo pipefail
root=${1:?usage: test_readme_recipe.sh SOURCE_ROOT CONY_TOOL}
cony=$(realpath "${2:?}")
/usr/bin/python3 -c 'import torch, gi' 2>/dev/null || { echo "1..0 # SKIP needs python3-torch and python3-gi"; exit 77; }
. "$(dirname "$0")/../tap.sh"

# The README's code block that runs train_your_own.py.
awk '/^```/ { if (on) { if (block ~ /train_your_own\.py/) { printf "%s", block; exit } on = 0; next }
              on = 1; block = ""; next }
     on { block = block $0 "\n" }' "$root/README.md" >"$tmp/recipe.sh"
if ! grep -q "train_your_own.py" "$tmp/recipe.sh"; then
  not_ok "README has no code block running training/train_your_own.py"; tap_done
fi
grep '^#   ' "$tmp/recipe.sh" | sed 's/^#   //' >"$tmp/transcript"
sed -i "s|^\(/usr/bin/python3 training/train_your_own.py .*\)$|\1 --cony \"$cony\"|" "$tmp/recipe.sh"
mkdir "$tmp/run"
for d in training pipelines models; do ln -s "$root/$d" "$tmp/run/$d"; done
(cd "$tmp/run" && bash -e "$tmp/recipe.sh") >"$tmp/out" 2>&1
rc=$?
if [ $rc = 0 ]; then
  ok "README's recipe runs ($(grep -cE '^ +[0-9.]+ s ' "$tmp/out") result lines from file.sh)"
else
  not_ok "README's recipe: exit $rc"; tail -8 "$tmp/out" | sed 's/^/# /'
fi
while IFS= read -r line; do
  # the line as a regular expression: every character literal, "..." any text
  re=$(printf '%s' "$line" | sed 's/[][\.*^$/]/\\&/g; s/\\\.\\\.\\\./.*/g')
  if grep -q "^$re" "$tmp/out"; then
    ok "transcript line found: $line"
  else
    not_ok "README's transcript line not in the output: $line"
    grep -E "window n = |validation accuracy" "$tmp/out" | sed 's/^/#   got: /'
  fi
done <"$tmp/transcript"
[ -s "$tmp/transcript" ] || not_ok "the recipe block has no '#   ' transcript lines"

tap_done
