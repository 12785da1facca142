#!/usr/bin/env bash
# The live audio+video soak, `scripts/soak.sh --av [SECONDS=3600] [PIPELINES=8]` (see
# soak.sh): one process of PIPELINES fused pipelines and PIPELINES processes of one, at
# the same time, for SECONDS of wall time; RSS, CPU, errors and lost steps.
#
#   scripts/soak_av.sh [SECONDS [PIPELINES]]
#
# CONY_SOAK_NICE (default 10): the pipelines' nice level. 0 with the rest of the machine's
# work at nice 19 measures the CPU the pipelines need rather than what they were left.
set -uo pipefail
source "$(dirname "$0")/../pipelines/help.sh"
cd "$(dirname "$0")/.."
secs=${1:-3600} n=${2:-8} which=${CONY_SOAK_AV:-both} niceness=${CONY_SOAK_NICE:-10}
bash scripts/build.sh >&2
export GST_PLUGIN_PATH=$PWD/build/gst
source pipelines/av_lib.sh
cony_av_setup "$CONY_AV_MODEL"
out=$(mktemp -d /tmp/cony-soak-av-XXXXXX)
echo "soak --av: $n pipelines a configuration ($which), $secs s, nice $niceness, logs in $out" >&2

# pipeline TAG: one live fused pipeline whose records go to $out/TAG.jsonl
pipeline () {
  echo "conyfuse name=fuse_$1 model=$CONY_AV_MODEL latency=250000000" \
    "! conytransformer model=$CONY_AV_MODEL post-messages=false ! conyjson" \
    "! filesink buffer-mode=unbuffered location=$out/$1.jsonl" \
    "audiotestsrc is-live=true wave=pink-noise volume=0.3 samplesperbuffer=1600" \
    "! audio/x-raw,rate=16000,channels=1 ! queue ! $(cony_av_audio_chain) ! fuse_$1.sink_audio" \
    "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=10/1" \
    "! queue ! $(cony_av_video_chain) ! fuse_$1.sink_video"
}

pids=() tags=()
start () { # NAME DESCRIPTION...
  local name=$1
  shift
  # shellcheck disable=SC2068
  nice -n "$niceness" gst-launch-1.0 -e $@ >"$out/$name.log" 2>&1 &
  pids+=($!) tags+=("$name")
}
if [ "$which" != many ]; then
  desc=""
  for i in $(seq 1 "$n"); do desc+=" $(pipeline "one_$i")"; done
  start one "$desc"
fi
if [ "$which" != one ]; then
  for i in $(seq 1 "$n"); do start "many_$i" "$(pipeline "many_$i")"; done
fi

# Samples every 10 s: "t process pid rss_kib cpu_ticks" and "t pipeline results".
t0=$(date +%s)
while [ $(($(date +%s) - t0)) -lt "$secs" ]; do
  t=$(date +%s)
  for k in "${!pids[@]}"; do
    p=${pids[$k]}
    [ -r "/proc/$p/stat" ] || continue
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
    cpu=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null)
    echo "$t ${tags[$k]} $p ${rss:-0} ${cpu:-0}" >>"$out/processes.samples"
  done
  for f in "$out"/*.jsonl; do
    [ -e "$f" ] || continue
    echo "$t $(basename "$f" .jsonl) $(grep -c '"type":"result"' "$f")" >>"$out/pipelines.samples"
  done
  sleep 10
done
t_stop=$(date +%s)
for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
status=0
for p in "${pids[@]}"; do
  for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
  kill -0 "$p" 2>/dev/null && { kill "$p"; echo "soak --av: pid $p did not stop on EOS" >&2; status=1; }
  wait "$p" || status=1
done
/usr/bin/python3 - "$out" "$t0" "$t_stop" "$(getconf CLK_TCK)" "$n" <<'PY' || status=1
import collections, glob, json, os, re, sys
out, t0, t_stop, hz, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
proc = collections.defaultdict(list)
for line in open(os.path.join(out, "processes.samples")):
    t, tag, pid, rss, cpu = line.split()
    proc[tag].append((int(t), int(rss), int(cpu)))
pipe = collections.defaultdict(list)
for line in open(os.path.join(out, "pipelines.samples")):
    t, tag, k = line.split()
    pipe[tag].append((int(t), int(k)))
bad = 0
for conf in ("one", "many"):
    tags = sorted(t for t in proc if t == conf or t.startswith(conf + "_"))
    if not tags:
        continue
    errors = []
    for tag in tags:
        for l in open(os.path.join(out, tag + ".log"), errors="replace"):
            if re.search(r"ERROR|WARNING|CRITICAL", l):
                errors.append(f"{tag}: {l.strip()}")
    # RSS: summed over the configuration's processes at each sample time
    times = sorted({t for tag in tags for t, _, _ in proc[tag]})
    rss = collections.defaultdict(int)
    cpu = collections.defaultdict(int)
    for tag in tags:
        for t, r, c in proc[tag]:
            rss[t] += r
            cpu[t] += c
    ts = [t for t in times if t in rss]
    mib = lambda k: k / 1024
    # steady state: after the first 5 minutes (start-up, caches), to the end
    steady = [t for t in ts if t >= ts[0] + 300] or ts
    first, last = steady[0], steady[-1]
    hours = (last - first) / 3600 or 1
    cpu_pct = lambda a, b: 100 * (cpu[b] - cpu[a]) / hz / (b - a) if b > a else 0
    print(f"soak --av {conf}: {len(tags)} process(es), {n} pipelines, {t_stop - t0} s wall; "
          f"{len(errors)} error/warning lines")
    for e in errors[:5]:
        print("   ", e)
    print(f"  RSS (all its processes): start {mib(rss[ts[0]]):.1f} MiB, at 5 min {mib(rss[first]):.1f}, "
          f"end {mib(rss[last]):.1f}, peak {mib(max(rss.values())):.1f}; "
          f"growth after 5 min {mib(rss[last] - rss[first]) / hours:+.1f} MiB/h")
    marks = [ts[0] + k * (ts[-1] - ts[0]) // 6 for k in range(7)]
    marks = [min(ts, key=lambda t: abs(t - m)) for m in marks]
    print("  CPU (% of one core, per 1/6 of the run): "
          + ", ".join(f"{cpu_pct(a, b):.0f}" for a, b in zip(marks, marks[1:])))
    print("  RSS (MiB, at 0, 1/6, ... 6/6 of the run): "
          + ", ".join(f"{mib(rss[m]):.0f}" for m in marks))
    # CPU trend: least-squares slope of the per-sample CPU rate from 5 min after the start
    # to 5 min before the end (start-up and teardown left out), in points per hour
    mid = [(a, b) for a, b in zip(ts, ts[1:]) if a >= ts[0] + 300 and b <= ts[-1] - 300]
    if len(mid) >= 3:
        xs = [(a + b) / 2 / 3600 for a, b in mid]
        ys = [cpu_pct(a, b) for a, b in mid]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"  CPU from 5 min to 5 min before the end: mean {my:.1f} % of one core, "
              f"trend {slope:+.1f} points/h ({len(mid)} intervals)")
    lost_total = 0
    for k in range(1, n + 1):
        tag = f"{conf}_{k}"
        recs = []
        path = os.path.join(out, tag + ".jsonl")
        for l in open(path) if os.path.exists(path) else []:
            r = json.loads(l)
            if r.get("type") == "result":
                recs.append((r["step"], r["pts"]))
        if not recs:
            print(f"  {tag}: no steps")
            bad += 1
            continue
        # Lost: step numbers missing between 0 and the last (a live conyfuse step is due every
        # 0.25 s of running time, so step i's pts must be i x 0.25 s); a restart: a step
        # number that does not follow the previous one.
        steps = [st for st, _ in recs]
        lost = steps[-1] + 1 - len(set(steps))
        restarts = sum(1 for a, b in zip(steps, steps[1:]) if b != a + 1)
        off_time = sum(1 for st, pts in recs if pts != st * 250000000)
        lost_total += lost
        # Lag: how far the pipeline's output was behind (+) or ahead of (-) the wall clock
        # at the samples, in steps, relative to the first sample that saw steps (a live
        # pipeline starved of CPU falls behind and catches up; it does not drop steps).
        s = [(t, c) for t, c in pipe.get(tag, []) if c > 0]
        lags = [4 * (t - s[0][0]) - (c - s[0][1]) for t, c in s] or [0]
        print(f"  {tag}: {len(steps)} steps, numbers 0..{steps[-1]}: lost {lost}, "
              f"restarts {restarts}, pts not step x 0.25 s: {off_time}; lag at the samples "
              f"{min(lags)}..{max(lags)} steps (last {lags[-1]})")
        bad += lost > 0 or restarts > 0 or off_time > 0
    print(f"  lost steps, all pipelines: {lost_total}")
    bad += len(errors) > 0
sys.exit(1 if bad else 0)
PY
echo "soak --av: samples and logs in $out" >&2
exit $status
