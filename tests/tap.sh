# TAP for the shell tests (sourced after their skip checks): a scratch directory $tmp,
# removed on exit; ok / not_ok number and print the test points; tap_done prints the
# plan and exits 1 if any point failed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
ok () { n=$((n + 1)); echo "ok $n $*"; }
not_ok () { n=$((n + 1)); echo "not ok $n $*"; fail=1; }
tap_done () { echo "1..$n"; exit $fail; }
