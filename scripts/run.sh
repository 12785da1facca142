#!/usr/bin/env bash
# The main job: sets up, builds, and runs the attention benchmark (every variant side
# by side at the papers' setting n=120, d=192, 16 heads, m=4).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec build/tools/cony bench attention "$@"
