#!/usr/bin/env bash
# Event clips: one file of the original audio per segment of the chosen labels, with N
# seconds of pre-roll, named by label and time; JSON lines of the segment events, each
# naming its file (pipelines/record_events.py has the details and every option).
#
#   pipelines/record_events.sh FILE|URI|SOURCE --out DIR [--labels 'bark;siren'] [--pre-roll 5]
#
# e.g. pipelines/record_events.sh mic --out clips --labels 'bark;smoke_alarm' > events.jsonl
set -euo pipefail
source "$(dirname "$0")/help.sh"
[ $# -ge 1 ] || cony_usage
exec /usr/bin/python3 "$(dirname "$0")/record_events.py" "$@"
