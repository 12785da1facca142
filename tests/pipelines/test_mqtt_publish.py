#!/usr/bin/python3
"""conymqttsink (through pipelines/mqtt_publish.py, whose pipeline ends in
`conyjson ! conymqttsink`) against a real mosquitto on 127.0.0.1 (a free port), started
and stopped here:

  1. a 4 s live audiotestsrc is classified and every record arrives at a subscriber, in
     order: the stream record, a result per step, the eos record; each validates against
     docs/results.schema.json (when python3-jsonschema is installed);
  2. the broker is stopped mid-stream and started again 1.5 s later: the publisher
     reports the reconnection with queued results, and every step still arrives in order
     (duplicates of a step whose acknowledgement was lost are allowed: QoS 1 is
     at-least-once), none missing, the same count the publisher reports. The broker runs
     with persistence and the subscriber with a persistent session, so what the broker
     accepted before the restart reaches the subscriber too;
  3. no broker at the start, one 2 s later: what was queued meanwhile arrives, nothing is
     lost (within the queue bound);
  4. conymqttsink straight after conytransformer (no conyjson) publishes one result record
     per classification meta, written by conyjson's formatter: exactly the result records
     conyjson writes for the same run (a tee feeds both);
  5. no broker at all, --max-queued 5: status 1, "no connection", never "published N
     results"; 5 not delivered, the rest dropped and counted; the live run is not held
     up (it ends within its length + drain timeout + start-up).

TAP output; skipped (77) without mosquitto, python3-paho-mqtt or conymqttsink.
    test_mqtt_publish.py SOURCE_ROOT VGGISH TRANSFORMER
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

try:
    import jsonschema
except ImportError:
    jsonschema = None

try:
    import paho.mqtt.client as mqtt
except ImportError:
    print("1..0 # SKIP python3-paho-mqtt not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mqttbroker  # noqa: E402
from mqttbroker import HOST, MOSQUITTO, free_port  # noqa: E402

LIVE = ("audiotestsrc is-live=true num-buffers={n} samplesperbuffer=4410 wave=sine freq=440 "
        "! audio/x-raw,rate=44100")


class Subscriber:
    """QoS 1, persistent session: collects the published records."""

    def __init__(self, port, topic):
        self.records = []
        self.lock = threading.Lock()
        self.topic = topic
        self.client = mqtt.Client(client_id="cony-test-subscriber", clean_session=False)
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.on_connect = lambda c, u, f, rc: c.subscribe(topic, qos=1)
        self.client.on_message = self.on_message
        self.subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.connect_async(HOST, port, keepalive=5)
        self.client.loop_start()

    def on_message(self, client, userdata, msg):
        with self.lock:
            self.records.append(json.loads(msg.payload))

    def count(self):
        with self.lock:
            return len(self.records)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def run_publisher(root, vggish, model, port, topic, seconds, restart=None, extra=()):
    """Runs mqtt_publish.py on @seconds of live audio; @restart() is called while it
    runs. Returns (rc, stderr lines)."""
    cmd = ["/usr/bin/python3", os.path.join(root, "pipelines", "mqtt_publish.py"),
           LIVE.format(n=seconds * 10), "--vggish", vggish, "--transformer", model,
           "--port", str(port), "--topic", topic, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    if restart:
        restart()
    try:
        rc = proc.wait(timeout=seconds + 40)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "timeout"
    reader.join(timeout=5)
    return rc, [line.rstrip() for line in lines]


def published_count(err):
    published = [line for line in err if "published" in line and "results to" in line]
    return int(published[-1].split("published ")[1].split()[0]) if published else -1


def check(n, name, records, rc, err, want_reconnect, validator):
    """ok/not ok line: rc 0; the stream record first, result steps 0..N-1 in order
    (repeats allowed), the eos record; as many distinct records as the publisher says it
    published; every record valid."""
    steps = [r.get("step") for r in records if r.get("type") == "result"]
    kinds = {r.get("type") for r in records}
    count = published_count(err)
    unique, in_order = [], True
    for st in steps:
        if st in unique:
            continue          # a QoS 1 re-send
        if unique and st != unique[-1] + 1:
            in_order = False
        unique.append(st)
    distinct = {json.dumps(r, sort_keys=True) for r in records}
    problems = []
    if rc != 0:
        problems.append(f"publisher exit {rc}")
    if count < 8:
        problems.append(f"publisher reports {count} results")
    if not records or records[0].get("type") != "stream" or "eos" not in kinds:
        problems.append(f"record types {[r.get('type') for r in records][:3]}...: want stream "
                        "first and an eos record")
    if unique != list(range(len(unique))) or not in_order:
        problems.append(f"steps received {steps} (want 0..N-1 in order)")
    if len(distinct) != count:
        problems.append(f"{len(distinct)} distinct records arrived, the publisher says {count}")
    if validator is not None:
        bad = [r for r in records if not validator.is_valid(r)]
        if bad:
            problems.append(f"{len(bad)} records do not validate against the schema: {bad[0]}")
    if want_reconnect:
        reconnect = [line for line in err if "reconnected to" in line]
        for line in err:
            if "lost the connection" in line.lower() or "reconnected to" in line:
                print(f"# {line}")
        if not reconnect:
            problems.append("no reconnection reported")
        elif "queued results" not in reconnect[0]:
            problems.append("nothing was queued during the outage: the test proved nothing")
    status = "not ok" if problems else "ok"
    print(f"{status} {n} {name}: {len(records)} messages, steps 0..{len(unique) - 1}, "
          f"{len(records) - len(distinct)} re-sent" + ("; " + "; ".join(problems) if problems else ""))
    if problems:
        for line in err[-15:]:
            print(f"# {line}")
    return not problems


def wait_for(sub, want, seconds):
    """Waits until @sub holds @want distinct records (or @seconds pass)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len({json.dumps(r, sort_keys=True) for r in list(sub.records)}) >= want:
            return
        time.sleep(0.1)


def no_broker(n, root, vggish, model, port):
    """No broker at all, --max-queued 5: refused, counted, never 'published N'."""
    start = time.monotonic()
    rc, err = run_publisher(root, vggish, model, port, "cony/test/none", 3,
                            extra=["--max-queued", "5", "--drain-timeout", "1"])
    took = time.monotonic() - start
    text = "\n".join(err)
    problems = []
    if rc != 1:
        problems.append(f"exit {rc}, want 1")
    if any("published" in line and "results to" in line for line in err):
        problems.append("it says it published results")
    if "no connection to" not in text or "5 results not delivered" not in text:
        problems.append("no 'no connection ... 5 results not delivered' line")
    dropped = [line for line in err if "dropped" in line and "no connection" in line]
    if not dropped or " 0 dropped" in dropped[0]:
        problems.append("nothing counted as dropped beyond the queue bound")
    if took > 3 + 1 + 12:
        problems.append(f"took {took:.1f} s for 3 s of live audio: the stream was held up")
    print(f"{'not ok' if problems else 'ok'} {n} no broker, max-queued 5: exit {rc} after "
          f"{took:.1f} s" + ("; " + "; ".join(problems) if problems else ""))
    for line in err[-4:]:
        print(f"# {line}")
    return not problems


def metas_direct(n, root, vggish, model, port):
    """conytransformer ! tee ! conymqttsink and ! conyjson: the same result records."""
    sub = Subscriber(port, "cony/test/metas")
    sub.subscribed.wait(5)
    tmp = tempfile.mkdtemp()
    out = os.path.join(tmp, "out.jsonl")
    desc = (f"audiotestsrc num-buffers=30 samplesperbuffer=4410 wave=sine freq=440 "
            f"! audio/x-raw,rate=44100 ! audioconvert ! audioresample ! conymel "
            f"! conyvggish model={vggish} ! conytransformer model={model} top-k=2 ! tee name=t "
            f"! queue ! conyjson ! filesink location={out} "
            f"t. ! queue ! conymqttsink host={HOST} port={port} topic=cony/test/metas qos=1")
    run = subprocess.run(["gst-launch-1.0", "-q", *desc.split()], capture_output=True, text=True,
                         timeout=60)
    with open(out, encoding="utf-8") as f:
        want = [r for r in map(json.loads, f) if r["type"] == "result"]
    shutil.rmtree(tmp, ignore_errors=True)
    wait_for(sub, len(want), 10)
    sub.close()
    got = list(sub.records)
    problems = []
    if run.returncode != 0:
        problems.append(f"gst-launch-1.0 exit {run.returncode}: {run.stderr[-300:]}")
    if len(want) != 10:
        problems.append(f"conyjson wrote {len(want)} results, want 10")
    if got != want:
        problems.append(f"{len(got)} published records differ from conyjson's "
                        f"(first: {got[:1]} vs {want[:1]})")
    print(f"{'not ok' if problems else 'ok'} {n} conytransformer ! conymqttsink: {len(got)} "
          "records, conyjson's" + ("; " + "; ".join(problems) if problems else ""))
    return not problems


def main():
    if not os.path.exists(MOSQUITTO):
        print("1..0 # SKIP mosquitto not installed")
        return 77
    if subprocess.run(["gst-inspect-1.0", "conymqttsink"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        print("1..0 # SKIP conymqttsink not built (no libmosquitto-dev)")
        return 77
    root, vggish, model = sys.argv[1:4]
    validator = None
    if jsonschema is not None:
        with open(os.path.join(root, "docs", "results.schema.json"), encoding="utf-8") as f:
            validator = jsonschema.Draft202012Validator(json.load(f))
    tmp = tempfile.mkdtemp()
    port = free_port()
    broker = mqttbroker.Broker(tmp, [f"listener {port} {HOST}\nallow_anonymous true"],
                               persistence=True)
    ok = True
    try:
        broker.start()
        def delivered(n, name, topic, seconds, during=None, before=None, reconnect=False):
            """A subscriber on @topic, then @before(sub), a publisher run on @seconds of
            live audio with @during(sub) while it runs; check() on what arrived."""
            sub = Subscriber(port, topic)
            sub.subscribed.wait(5)
            if before:
                before()
            rc, err = run_publisher(root, vggish, model, port, topic, seconds,
                                    during and (lambda: during(sub)))
            wait_for(sub, published_count(err), 10)
            sub.close()
            return check(n, name, list(sub.records), rc, err, reconnect, validator)

        def restart(sub):
            deadline = time.monotonic() + 20
            while sub.count() < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            broker.stop()
            time.sleep(1.5)
            broker.start()

        def late(sub):
            time.sleep(2)
            broker.start()

        ok &= delivered(1, "every record in order", "cony/test/plain", 4)
        ok &= delivered(2, "broker restarted mid-stream", "cony/test/restart", 6, restart,
                        reconnect=True)
        ok &= delivered(3, "broker up 2 s after the start", "cony/test/late", 5, late,
                        before=broker.stop)
        ok &= metas_direct(4, root, vggish, model, port)
        broker.stop()

        # 5. no broker at all
        ok &= no_broker(5, root, vggish, model, port)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..5")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
