# shellcheck shell=bash
# Sourced first, with the script's arguments, by every script in pipelines/ and scripts/:
# -h or --help as the first argument prints the script's header comment (the lines after
# "#!" up to the first line that is no comment: its usage, options, environment) and exits
# 0. cony_usage prints the usage line(s) of that header to stderr and exits 2 (a required
# argument is missing or one is not understood).
cony_header () {
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
}
case ${1:-} in
  -h | --help) cony_header; exit 0 ;;
esac
# The usage lines are the header's "  pipelines/NAME ..." or "  scripts/NAME ..." lines,
# with any deeper-indented lines that continue them.
cony_usage () {
  cony_header | awk '
    /^  +(pipelines|scripts)\/[a-z0-9_-]+\.(sh|py)/ { sub(/^  +/, ""); print "usage: " $0; on = 1; next }
    on && /^       +[^ ]/ { sub(/^  +/, "       "); print; next }
    { on = 0 }' >&2
  echo "($(basename "$0") --help says more)" >&2
  exit 2
}
