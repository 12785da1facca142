#!/usr/bin/env bash
# The conymel and conyvggish properties the pipelines take from a classifier's config
# (pipelines/lib.sh's cony_token_props and print_results.py's token_props agree): YAMNet's
# preset and pooled embedding, and for a classifier trained on continual tokens (issue 61,
# rule 36) the continual CNN at the recorded stride; a window-mode classifier gets neither.
#   test_token_props.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: test_token_props.sh SOURCE_ROOT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0

# fake_classifier FILE FRONTEND_JSON: a safetensors header whose config holds the frontend
fake_classifier () {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
cfg = {"frontend": json.loads(sys.argv[2]), "labels": ["a", "b"]}
h = json.dumps({"__metadata__": {"config": json.dumps(cfg, separators=(",", ":"))}},
               separators=(",", ":")).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
}

check () {   # NAME FRONTEND_JSON WANT_MEL WANT_CNN
  local f="$tmp/$1.safetensors" got py
  fake_classifier "$f" "$2"
  got=$(CONY_TRANSFORMER=$f bash -c 'source "$1/pipelines/lib.sh"; cony_token_props;
        echo "$cony_mel_props|$cony_cnn_props"' _ "$root")
  py=$(cd "$root/pipelines" && /usr/bin/python3 -c \
    'import sys, print_results as p; print("|".join(p.token_props(sys.argv[1])))' "$f")
  n=$((n + 1))
  if [ "$got" = "$3|$4" ] && [ "$py" = "$3|$4" ]; then
    echo "ok $n - $1: '$3' '$4'"
  else
    echo "not ok $n - $1: lib.sh '$got', print_results.py '$py', want '$3|$4'"; fail=1
  fi
}

check window '{"name":"yamnet","cnn":"y.safetensors","cnn_output":"embedding","stride_frames":25}' \
  preset=yamnet output=embedding
check continual '{"name":"yamnet","cnn":"y.safetensors","cnn_output":"embedding","stride_frames":32,"cnn_mode":"continual"}' \
  preset=yamnet "output=embedding mode=continual stride=32"
check continual-64 '{"name":"yamnet","cnn_output":"embedding","cnn_mode":"continual","stride_frames":64}' \
  preset=yamnet "output=embedding mode=continual stride=64"
check vggish '{"kind":"audio-logmel-vggish"}' "" ""
echo "1..$n"
exit $fail
