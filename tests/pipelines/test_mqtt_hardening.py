#!/usr/bin/python3
"""conymqttsink under MQTT faults (issue 57 item 4), against a real mosquitto on 127.0.0.1 and
a fake broker that accepts TCP and never answers. Numbered records ({"type":"result",
"step":i}) go in through appsrc at 100 a second; each case counts the records produced,
delivered (distinct steps a paho subscriber got), repeated and dropped:

  1. QoS 2, the broker restarted mid-stream (persistence on, the subscriber's session
     persistent): every step delivered, and repeats only of what was in flight at the
     restart (at most the 20 the element keeps unacknowledged): exactly once per
     connection, as documented;
  2. a broker that accepts TCP and never sends CONNACK: start() gives up waiting after 2 s
     (the stream is not held up), a warning names the missing CONNACK; when a real broker
     takes the port over, every step is delivered;
  3. a subscriber slower than the stream (20 ms a message against 10 ms between records):
     the publisher is not held up (all acknowledged by the broker at EOS), and the
     subscriber gets every step, later;
  4. max-queued 50 with the broker away for 200 records: one warning, `dropped` 150, and the
     50 oldest delivered when the broker comes: produced = delivered + dropped;
  5. EOS while disconnected: with drain-timeout 1.5 s EOS completes after about 1.5 s with a
     warning naming the undelivered count; with a broker that comes 1 s into a 10 s
     drain, EOS completes as soon as all are delivered;
  6. state changes while reconnection attempts are under way (the broker away):
     PLAYING->PAUSED->PLAYING, PLAYING->READY->PLAYING and PLAYING->NULL each complete
     within 3 s; the records queued across the PAUSED and READY cycles are all delivered
     when the broker comes (GstBaseSink starts and stops at NULL: only NULL drops the
     queue);
  7. a broker that sends a malformed packet (MQTT's reserved type 0) after CONNACK (the
     element reconnects to it a few times), then a real broker on the port: the loss is
     reported, every step delivered (libmosquitto's network thread ends after a protocol
     or TLS error; the element starts it again) and repeated at most once per step of the
     in-flight window (libmosquitto resends what it holds; the element no longer
     publishes it again too).

TAP output; skipped (77) without mosquitto, python3-paho-mqtt or conymqttsink.
"""

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

try:
    import paho.mqtt.client as mqtt
except ImportError:
    print("1..0 # SKIP python3-paho-mqtt not installed")
    sys.exit(77)

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mqttbroker  # noqa: E402
from mqttbroker import HOST  # noqa: E402

INFLIGHT = 20   # the element's window of unacknowledged messages


class Subscriber:
    """QoS @qos, persistent session: the steps received on @topic, in order."""

    def __init__(self, port, topic, qos=1, delay=0.0, name="cony-hardening"):
        self.steps = []
        self.lock = threading.Lock()
        self.delay = delay
        ready = threading.Event()
        self.client = mqtt.Client(client_id=name, clean_session=False)
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.on_connect = lambda c, u, f, rc: c.subscribe(topic, qos=qos)
        self.client.on_subscribe = lambda *a: ready.set()
        self.client.on_message = self.on_message
        self.client.connect_async(HOST, port, keepalive=5)
        self.client.loop_start()
        if not ready.wait(10):
            raise RuntimeError("the subscriber did not subscribe")

    def on_message(self, client, userdata, msg):
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.steps.append(json.loads(msg.payload)["step"])

    def wait(self, n, seconds):
        """Until @n distinct steps arrived (or @seconds)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(set(self.got())) < n:
            time.sleep(0.05)
        return self.got()

    def got(self):
        with self.lock:
            return list(self.steps)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()
        return self.got()


class Publisher:
    """appsrc ! conymqttsink with @props; its warnings and errors are collected."""

    def __init__(self, port, topic, props=""):
        self.pipeline = Gst.parse_launch(
            "appsrc name=src caps=application/x-json format=time is-live=true ! conymqttsink "
            f"name=sink host={HOST} port={port} topic={topic} {props}")
        self.src = self.pipeline.get_by_name("src")
        self.sink = self.pipeline.get_by_name("sink")
        self.warnings, self.errors = [], []
        self.step = 0

    def play(self):
        """PLAYING; returns the seconds set_state() took."""
        start = time.monotonic()
        self.pipeline.set_state(Gst.State.PLAYING)
        return time.monotonic() - start

    def push(self, n, rate=100):
        for _ in range(n):
            buf = Gst.Buffer.new_wrapped(
                (json.dumps({"type": "result", "step": self.step}) + "\n").encode())
            self.src.emit("push-buffer", buf)
            self.step += 1
            time.sleep(1 / rate)
        self.poll()

    def poll(self):
        bus = self.pipeline.get_bus()
        while True:
            msg = bus.pop_filtered(Gst.MessageType.WARNING | Gst.MessageType.ERROR)
            if msg is None:
                return
            if msg.type == Gst.MessageType.WARNING:
                err, dbg = msg.parse_warning()
                self.warnings.append(f"{err.message} ({dbg.splitlines()[-1]})")
            else:
                err, dbg = msg.parse_error()
                self.errors.append(f"{err.message} ({dbg.splitlines()[-1]})")

    def eos(self, seconds=30):
        """EOS and waits for it; returns the seconds it took."""
        start = time.monotonic()
        self.src.emit("end-of-stream")
        bus = self.pipeline.get_bus()
        kinds = Gst.MessageType.EOS | Gst.MessageType.ERROR | Gst.MessageType.WARNING
        while True:
            msg = bus.timed_pop_filtered(seconds * Gst.SECOND, kinds)
            if msg is None or msg.type != Gst.MessageType.WARNING:
                break
            err, dbg = msg.parse_warning()
            self.warnings.append(f"{err.message} ({dbg.splitlines()[-1]})")
        took = time.monotonic() - start
        if msg is None or msg.type != Gst.MessageType.EOS:
            self.errors.append("no EOS" if msg is None else str(msg.parse_error()[0].message))
        return took

    def get(self, prop):
        return self.sink.get_property(prop)

    def stop(self):
        self.pipeline.set_state(Gst.State.NULL)


def report(n, name, problems, counts, notes=()):
    print(f"{'not ok' if problems else 'ok'} {n} {name}: {counts}"
          + ("; " + "; ".join(problems) if problems else ""))
    for line in notes if problems else ():
        print(f"# {line}")
    return not problems


def counts(produced, steps, pub):
    distinct = set(steps)
    return (f"produced {produced}, delivered {len(distinct)}, repeated "
            f"{len(steps) - len(distinct)}, published {pub.get('published')}, "
            f"dropped {pub.get('dropped')}")


def qos2_restart(n, port, broker):
    topic = "cony/hard/qos2"
    sub = Subscriber(port, topic, qos=2, name="cony-qos2")
    pub = Publisher(port, topic, "qos=2")
    pub.play()
    pub.push(150)
    broker.stop()
    pub.push(50)
    broker.start()
    pub.push(200)
    pub.eos()
    steps = sub.wait(400, 20)
    sub.close()
    text = counts(400, steps, pub)
    pub.stop()
    problems = []
    if sorted(set(steps)) != list(range(400)):
        problems.append(f"missing steps {sorted(set(range(400)) - set(steps))[:10]}")
    repeats = len(steps) - len(set(steps))
    if repeats > INFLIGHT:
        problems.append(f"{repeats} repeats: more than the {INFLIGHT} in flight at the restart")
    if not any("Lost the connection" in w for w in pub.warnings):
        problems.append("the restart was not noticed")
    return report(n, "QoS 2 across a broker restart", problems + pub.errors, text, pub.warnings)


class SilentBroker:
    """Accepts TCP connections on @port and never answers."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, port))
        self.sock.listen(16)
        self.conns = []
        self.running = True
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                return

    def close(self):
        self.running = False
        self.sock.close()
        for c in self.conns:
            c.close()


def silent_broker(n, tmp):
    port = mqttbroker.free_port()
    topic = "cony/hard/silent"
    fake = SilentBroker(port)
    pub = Publisher(port, topic, "keepalive=5")
    took = pub.play()
    pub.push(100)
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline and not any("CONNACK" in w for w in pub.warnings):
        pub.push(10)
    fake.close()
    broker = mqttbroker.Broker(os.path.join(tmp, "silent"),
                               [f"listener {port} {HOST}\nallow_anonymous true"])
    broker.start()
    sub = Subscriber(port, topic, name="cony-silent")
    pub.push(50)
    pub.eos()
    produced = pub.step
    steps = sub.wait(produced, 15)
    sub.close()
    text = counts(produced, steps, pub)
    pub.stop()
    broker.stop()
    problems = []
    if took > 3:
        problems.append(f"PLAYING took {took:.1f} s")
    if not any("CONNACK" in w for w in pub.warnings):
        problems.append("no warning about the missing CONNACK")
    if sorted(set(steps)) != list(range(produced)):
        problems.append(f"{produced - len(set(steps))} steps missing")
    return report(n, f"silent broker (PLAYING after {took:.1f} s), then a real one",
                  problems + pub.errors, text, pub.warnings)


class GarbageBroker(SilentBroker):
    """Answers the first CONNECT with a CONNACK, then sends a packet of MQTT's reserved
    type 0 (a protocol error for the client)."""

    def accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            try:
                conn.recv(1024)
                conn.sendall(bytes([0x20, 0x02, 0x00, 0x00]))
                time.sleep(0.3)
                conn.sendall(bytes([0x00, 0x00]))
            except OSError:    # closed by close()
                return


def protocol_error(n, tmp):
    port = mqttbroker.free_port()
    topic = "cony/hard/garbage"
    fake = GarbageBroker(port)
    pub = Publisher(port, topic)
    pub.play()
    pub.push(100)
    fake.close()
    broker = mqttbroker.Broker(os.path.join(tmp, "garbage"),
                               [f"listener {port} {HOST}\nallow_anonymous true"])
    broker.start()
    sub = Subscriber(port, topic, name="cony-garbage")
    pub.push(100)
    pub.eos(seconds=20)
    steps = sub.wait(200, 10)
    sub.close()
    text = counts(200, steps, pub)
    pub.stop()
    broker.stop()
    problems = []
    if not any("Lost the connection" in w for w in pub.warnings):
        problems.append("the protocol error was not reported")
    if sorted(set(steps)) != list(range(200)):
        problems.append(f"{200 - len(set(steps))} steps missing: no reconnection after the "
                        "protocol error")
    repeats = len(steps) - len(set(steps))
    if repeats > INFLIGHT:
        problems.append(f"{repeats} repeats: more than the {INFLIGHT} in flight (a copy more "
                        "per reconnection?)")
    return report(n, "a malformed packet from the broker, then a real broker",
                  problems + pub.errors, text, pub.warnings)


def slow_subscriber(n, port):
    topic = "cony/hard/slow"
    sub = Subscriber(port, topic, delay=0.02, name="cony-slow")
    pub = Publisher(port, topic)
    pub.play()
    start = time.monotonic()
    pub.push(300)
    eos = pub.eos()
    pushed = time.monotonic() - start
    published = pub.get("published")
    steps = sub.wait(300, 20)
    sub.close()
    text = counts(300, steps, pub) + f", stream {pushed:.1f} s, subscriber done later"
    pub.stop()
    problems = []
    if published != 300 or eos > 2:
        problems.append(f"the publisher was held up: {published} acknowledged, EOS {eos:.1f} s")
    if sorted(set(steps)) != list(range(300)):
        problems.append(f"{300 - len(set(steps))} steps missing at the subscriber")
    return report(n, "subscriber slower than the stream", problems + pub.errors, text)


def queue_full(n, port, broker):
    topic = "cony/hard/full"
    broker.stop()
    pub = Publisher(port, topic, "max-queued=50 drain-timeout=15000")
    pub.play()
    pub.push(200, rate=200)
    broker.start()
    sub = Subscriber(port, topic, name="cony-full")
    pub.eos()
    steps = sub.wait(50, 10)
    sub.close()
    text = counts(200, steps, pub)
    dropped = pub.get("dropped")
    pub.stop()
    full = [w for w in pub.warnings if "queue full" in w]
    problems = []
    if len(full) != 1:
        problems.append(f"{len(full)} queue-full warnings, want 1")
    if dropped != 150 or sorted(set(steps)) != list(range(50)):
        problems.append(f"dropped {dropped}, delivered {sorted(set(steps))[:3]}...: want 150 "
                        "dropped and steps 0..49")
    return report(n, "max-queued 50 exhausted", problems + pub.errors, text, pub.warnings)


def eos_disconnected(n, port, broker):
    problems = []
    broker.stop()
    pub = Publisher(port, "cony/hard/eos1", "drain-timeout=1500")
    pub.play()
    pub.push(20)
    took = pub.eos()
    pub.stop()
    if not 1.3 < took < 4:
        problems.append(f"EOS after {took:.1f} s with drain-timeout 1.5 s")
    if not any("20 results not delivered" in w for w in pub.warnings):
        problems.append(f"no warning naming 20 undelivered: {pub.warnings[-1:]}")
    # the broker comes back during the drain
    topic = "cony/hard/eos2"
    sub = None
    pub = Publisher(port, topic, "drain-timeout=10000")
    pub.play()
    pub.push(20)
    restart = threading.Timer(1.0, broker.start)
    restart.start()
    took2 = pub.eos()
    restart.join()
    sub = Subscriber(port, topic, name="cony-eos")   # its session existed? no: retained queue
    sub.close()
    published = pub.get("published")
    pub.stop()
    if published != 20 or took2 > 8:
        problems.append(f"broker back during the drain: {published} published, EOS after "
                        f"{took2:.1f} s")
    return report(n, "EOS while disconnected", problems + pub.errors,
                  f"EOS after {took:.1f} s (drain-timeout 1.5 s, 20 not delivered); broker back "
                  f"1 s into the drain: {published} of 20 published, EOS after {took2:.1f} s")


def state_changes(n, port, broker):
    topic = "cony/hard/states"
    sub = Subscriber(port, topic, name="cony-states")
    broker.stop()
    pub = Publisher(port, topic, "drain-timeout=15000")
    pub.play()
    pub.push(20)
    times, results = [], []

    def change(state):
        # set_state() itself: a live pipeline completes PAUSED->PLAYING only with the
        # next buffer, so get_state() would time what appsrc does, not the sink
        start = time.monotonic()
        results.append(pub.pipeline.set_state(state))
        times.append(time.monotonic() - start)

    change(Gst.State.PAUSED)
    change(Gst.State.PLAYING)
    pub.push(20)
    kept = pub.get("queued")
    change(Gst.State.READY)
    change(Gst.State.PLAYING)
    pub.push(20)
    if Gst.StateChangeReturn.FAILURE in results:
        pub.errors.append(f"state changes returned {results}")
    broker.start()
    pub.eos()
    steps = sub.wait(60, 10)
    sub.close()
    text = counts(60, steps, pub) + f", state changes {', '.join(f'{t:.1f}' for t in times)} s"
    pub.stop()
    # NULL while attempts are under way: quick, the queue dropped
    broker.stop()
    pub = Publisher(port, topic)
    pub.play()
    pub.push(10)
    start = time.monotonic()
    pub.stop()
    times.append(time.monotonic() - start)
    text += f", {', '.join(f'{t:.1f}' for t in times[-1:])} s to NULL"
    broker.start()
    problems = []
    if max(times) > 3:
        problems.append("a state change took more than 3 s")
    if kept != 40:
        problems.append(f"{kept} queued after PAUSED->PLAYING, want 40")
    # PAUSED and READY keep the queue (GstBaseSink starts and stops at NULL)
    if sorted(set(steps)) != list(range(60)):
        problems.append(f"delivered {sorted(set(steps))}, want 0..59")
    return report(n, "state changes while reconnecting", problems + pub.errors, text,
                  pub.warnings)


def main():
    if not os.path.exists(mqttbroker.MOSQUITTO):
        print("1..0 # SKIP mosquitto not installed")
        return 77
    Gst.init(None)
    if Gst.ElementFactory.find("conymqttsink") is None:
        print("1..0 # SKIP conymqttsink not built (no libmosquitto-dev)")
        return 77
    tmp = tempfile.mkdtemp()
    os.makedirs(os.path.join(tmp, "silent"))
    os.makedirs(os.path.join(tmp, "garbage"))
    port = mqttbroker.free_port()
    broker = mqttbroker.Broker(tmp, [f"listener {port} {HOST}\nallow_anonymous true"],
                               persistence=True)
    cases = [lambda k: qos2_restart(k, port, broker), lambda k: silent_broker(k, tmp),
             lambda k: slow_subscriber(k, port), lambda k: queue_full(k, port, broker),
             lambda k: eos_disconnected(k, port, broker),
             lambda k: state_changes(k, port, broker), lambda k: protocol_error(k, tmp)]
    only = [int(a) for a in sys.argv[1:]]
    ok = True
    try:
        broker.start()
        for k, case in enumerate(cases, 1):
            if only and k not in only:
                continue
            if broker.proc is None or broker.proc.poll() is not None:
                broker.start()
            ok &= case(k)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{len(cases)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
