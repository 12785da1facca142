#!/usr/bin/python3
"""pipelines/mqtt_publish.py against a real mosquitto on 127.0.0.1 (a free port), started
and stopped here:

  1. a 6 s live audiotestsrc is classified and every step arrives at a subscriber, as
     JSON, in order;
  2. the broker is stopped mid-stream and started again 1.5 s later: the publisher
     reports the reconnection, and every step still arrives in order (duplicates of a
     step whose acknowledgement was lost are allowed: QoS 1 is at-least-once), none
     missing, the same count the publisher reports. The broker runs with persistence
     and the subscriber with a persistent session, so what the broker accepted before
     the restart reaches the subscriber too.

TAP output; skipped (77) without mosquitto or python3-paho-mqtt.
    test_mqtt_publish.py SOURCE_ROOT VGGISH TRANSFORMER
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import paho.mqtt.client as mqtt
except ImportError:
    print("1..0 # SKIP python3-paho-mqtt not installed")
    sys.exit(77)

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
HOST = "127.0.0.1"
LIVE = ("audiotestsrc is-live=true num-buffers={n} samplesperbuffer=4410 wave=sine freq=440 "
        "! audio/x-raw,rate=44100")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Broker:
    """mosquitto on HOST:port with persistence in @workdir."""

    def __init__(self, workdir, port):
        self.port = port
        self.conf = os.path.join(workdir, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write(f"listener {port} {HOST}\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {workdir}/\nlog_dest file {workdir}/mosquitto.log\n")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((HOST, self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mosquitto exited with {self.proc.returncode}")
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not open its port")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # saves its persistence file
            self.proc.wait(timeout=10)


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


def run_publisher(root, vggish, model, port, topic, seconds, restart=None):
    """Runs mqtt_publish.py on @seconds of live audio; @restart(stderr_lines) is called
    from a thread once the subscriber has a few results. Returns (rc, stderr lines)."""
    cmd = ["/usr/bin/python3", os.path.join(root, "pipelines", "mqtt_publish.py"),
           LIVE.format(n=seconds * 10), "--vggish", vggish, "--transformer", model,
           "--port", str(port), "--topic", topic]
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


def check(n, name, records, rc, err, want_reconnect):
    """ok/not ok line: rc 0, steps 0..N-1 in order (repeats of the latest step allowed),
    N = what the publisher says it published."""
    steps = [r.get("step") for r in records]
    published = [line for line in err if "published" in line]
    count = int(published[-1].split("published ")[1].split()[0]) if published else -1
    unique = []
    in_order = True
    for s in steps:
        if unique and s == unique[-1] or s in unique:
            continue          # a QoS 1 re-send
        if unique and s != unique[-1] + 1:
            in_order = False
        unique.append(s)
    problems = []
    if rc != 0:
        problems.append(f"publisher exit {rc}")
    if count < 8:
        problems.append(f"publisher reports {count} results")
    if unique != list(range(count)) or not in_order:
        problems.append(f"steps received {steps} (want 0..{count - 1} in order)")
    if not all("label" in r and "scores" in r for r in records):
        problems.append("a record lacks label/scores")
    if want_reconnect:
        reconnect = [line for line in err if "reconnected to" in line]
        for line in err:
            if "lost the connection" in line or "reconnected to" in line:
                print(f"# {line}")
        if not reconnect:
            problems.append("no reconnection reported")
        elif "queued results" not in reconnect[0]:
            problems.append("nothing was queued during the outage: the test proved nothing")
    status = "not ok" if problems else "ok"
    print(f"{status} {n} {name}: {len(records)} messages, steps 0..{count - 1}, "
          f"{len(steps) - len(unique)} re-sent" + ("; " + "; ".join(problems) if problems else ""))
    if problems:
        for line in err[-15:]:
            print(f"# {line}")
    return not problems


def main():
    if not os.path.exists(MOSQUITTO):
        print("1..0 # SKIP mosquitto not installed")
        return 77
    root, vggish, model = sys.argv[1:4]
    tmp = tempfile.mkdtemp()
    port = free_port()
    broker = Broker(tmp, port)
    ok = True
    try:
        broker.start()
        # 1. a plain run
        sub = Subscriber(port, "cony/test/plain")
        sub.subscribed.wait(5)
        rc, err = run_publisher(root, vggish, model, port, "cony/test/plain", 4)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("published" in x for x in err):
            time.sleep(0.1)
        time.sleep(0.5)   # the last deliveries
        ok &= check(1, "every result in order", list(sub.records), rc, err, False)
        sub.close()

        # 2. the broker restarts mid-stream
        sub = Subscriber(port, "cony/test/restart")
        sub.subscribed.wait(5)

        def restart():
            deadline = time.monotonic() + 20
            while sub.count() < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            broker.stop()
            time.sleep(1.5)
            broker.start()

        rc, err = run_publisher(root, vggish, model, port, "cony/test/restart", 6, restart)
        deadline = time.monotonic() + 10
        published = [x for x in err if "published" in x]
        want = int(published[-1].split("published ")[1].split()[0]) if published else 0
        while time.monotonic() < deadline and len({r["step"] for r in sub.records}) < want:
            time.sleep(0.1)
        ok &= check(2, "broker restarted mid-stream", list(sub.records), rc, err, True)
        sub.close()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..2")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
