#!/usr/bin/python3
"""conymqttsink's Home Assistant MQTT discovery against a real mosquitto on 127.0.0.1 (a free
port), checked by paho subscribers (no Home Assistant needed):

  1. conyjson records (pushed through appsrc, one every 0.2 s) into `conymqttsink
     ha-discovery=true ha-labels="speech, Dog bark" ha-groups-file=...`: the states arrive
     in order: the label sensor speech, music, smoke_alarm, music, speech; speech OFF ON
     OFF ON OFF; smoke_alarm (a group of the groups file) OFF ON OFF, ON while its
     segment is open although music and then speech are the top label; Dog bark OFF;
     availability online, then offline at the clean stop;
  2. a subscriber that comes afterwards gets the retained discovery configs: one sensor and
     one binary sensor per label, valid JSON with name, unique_id (distinct), state_topic,
     availability_topic, payload_available/not_available, device (identifiers, name), the
     binary ones payload_on/off; the retained states and "offline";
  3. a publisher killed (SIGKILL) while online: the broker publishes its last will,
     availability "offline", retained;
  4. a groups file with a line that is not a group and an ha-node-id with a '/': errors
     naming the file and line, the property.

TAP output; skipped (77) without mosquitto, python3-paho-mqtt or conymqttsink.
"""

import json
import os
import shutil
import signal
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

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mqttbroker  # noqa: E402
from mqttbroker import HOST  # noqa: E402

NODE = "testnode"
GROUPS = """# home events
smoke_alarm = Smoke detector, smoke alarm; Fire alarm

speech = Speech; Conversation
"""


def result(step, label, *events):
    return {"type": "result", "step": step, "label": label, "score": 0.9,
            "events": [{"event": e, "label": lab, "segment_start": 0, "segment_end": None}
                       for e, lab in events]}


RECORDS = [
    {"type": "stream", "stream": {"media": "other/tensors"}},
    result(0, "speech", ("onset", "speech")),
    result(1, "speech"),
    result(2, "music", ("offset", "speech"), ("onset", "music")),
    result(3, "smoke_alarm", ("onset", "smoke_alarm")),
    result(4, "music"),
    result(5, "speech", ("offset", "smoke_alarm")),
    {"type": "eos", "step": 5, "events": [{"event": "offset", "label": "music"}]},
]
WANT = {
    f"cony/{NODE}/label": ["speech", "music", "smoke_alarm", "music", "speech"],
    f"cony/{NODE}/labels/speech": ["OFF", "ON", "OFF", "ON", "OFF"],
    f"cony/{NODE}/labels/smoke_alarm": ["OFF", "ON", "OFF"],
    f"cony/{NODE}/labels/dog_bark": ["OFF"],
    f"cony/{NODE}/availability": ["online", "offline"],
}
# the label and smoke_alarm topics together, in arrival order: smoke_alarm stays ON after
# the top label moved on to music, until its segment's offset
TIMELINE = ["smoke_alarm=OFF", "label=speech", "label=music", "label=smoke_alarm",
            "smoke_alarm=ON", "label=music", "label=speech", "smoke_alarm=OFF"]


class Subscriber:
    """Every message on @topics: (topic, payload, retain), in arrival order."""

    def __init__(self, port, topics):
        self.messages = []
        self.lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client()
        self.client.on_connect = lambda c, u, f, rc: c.subscribe([(t, 1) for t in topics])
        self.client.on_subscribe = lambda *a: ready.set()
        self.client.on_message = self.on_message
        self.client.connect(HOST, port)
        self.client.loop_start()
        if not ready.wait(10):
            raise RuntimeError("the subscriber did not subscribe")

    def on_message(self, client, userdata, msg):
        with self.lock:
            self.messages.append((msg.topic, msg.payload.decode(), bool(msg.retain)))

    def wait(self, pred, seconds=5):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if pred(list(self.messages)):
                    return True
            time.sleep(0.05)
        return False

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()
        return list(self.messages)


def report(n, name, problems, notes=()):
    print(f"{'not ok' if problems else 'ok'} {n} {name}"
          + ("; " + "; ".join(problems) if problems else ""))
    for line in notes if problems else ():
        print(f"# {line}")
    return not problems


def run_records(port, groups):
    """The records through appsrc into conymqttsink; returns the bus errors."""
    pipeline = Gst.parse_launch(
        "appsrc name=src caps=application/x-json format=time ! conymqttsink name=sink "
        f"host={HOST} port={port} topic=cony/ha/records ha-discovery=true ha-node-id={NODE} "
        f"ha-labels=\"speech, Dog bark\" ha-groups-file={groups}")
    src = pipeline.get_by_name("src")
    pipeline.set_state(Gst.State.PLAYING)
    for i, record in enumerate(RECORDS):
        data = (json.dumps(record) + "\n").encode()
        buf = Gst.Buffer.new_wrapped(data)
        buf.pts = i * Gst.SECOND // 4
        src.emit("push-buffer", buf)
        time.sleep(0.2)
    src.emit("end-of-stream")
    bus = pipeline.get_bus()
    msg = bus.timed_pop_filtered(10 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    errors = []
    if msg is None or msg.type == Gst.MessageType.ERROR:
        errors.append("no EOS" if msg is None else str(msg.parse_error()[0].message))
    pipeline.set_state(Gst.State.NULL)
    return errors


def states(port, groups):
    """1: the live sequence of states."""
    sub = Subscriber(port, [f"cony/{NODE}/#"])
    errors = run_records(port, groups)
    sub.wait(lambda ms: any(t.endswith("availability") and p == "offline" for t, p, r in ms))
    got, timeline = {}, []
    for topic, payload, _ in sub.close():
        got.setdefault(topic, []).append(payload)
        name = topic.rsplit("/", 1)[1]
        if name in ("label", "smoke_alarm"):
            timeline.append(f"{name}={payload}")
    problems = list(errors)
    for topic, want in WANT.items():
        if got.get(topic) != want:
            problems.append(f"{topic}: {got.get(topic)}, want {want}")
    if timeline != TIMELINE:
        problems.append(f"label and smoke_alarm in order: {timeline}, want {TIMELINE}")
    return report(1, "states in order, ON while top or segment open, online then offline",
                  problems, [f"{t}: {v}" for t, v in got.items()])


def configs(port):
    """2: the retained configs and states, as a subscriber that comes later sees them."""
    sub = Subscriber(port, ["homeassistant/#", f"cony/{NODE}/#"])
    time.sleep(1)
    messages = sub.close()
    problems = []
    if not all(r for _, _, r in messages):
        problems.append("a message arrived without the retain flag")
    cfg = {t: p for t, p, _ in messages if t.startswith("homeassistant/")}
    want_topics = {f"homeassistant/sensor/{NODE}/label/config"} | {
        f"homeassistant/binary_sensor/{NODE}/{s}/config"
        for s in ("speech", "dog_bark", "smoke_alarm")}
    if set(cfg) != want_topics:
        problems.append(f"config topics {sorted(cfg)}, want {sorted(want_topics)}")
    ids, names = set(), set()
    for topic, payload in cfg.items():
        try:
            c = json.loads(payload)
        except ValueError:
            problems.append(f"{topic}: not JSON")
            continue
        keys = {"name", "unique_id", "state_topic", "availability_topic", "payload_available",
                "payload_not_available", "device"}
        if "binary_sensor" in topic:
            keys |= {"payload_on", "payload_off"}
        missing = keys - set(c)
        if missing:
            problems.append(f"{topic}: no {sorted(missing)}")
            continue
        ids.add(c["unique_id"])
        names.add(c["name"])
        dev = c["device"]
        if not dev.get("identifiers") or not dev.get("name"):
            problems.append(f"{topic}: device without identifiers or name")
        if c["availability_topic"] != f"cony/{NODE}/availability":
            problems.append(f"{topic}: availability_topic {c['availability_topic']}")
        if (c["payload_available"], c["payload_not_available"]) != ("online", "offline"):
            problems.append(f"{topic}: availability payloads")
        state = [p for t, p, _ in messages if t == c["state_topic"]]
        if not state:
            problems.append(f"{topic}: nothing retained on its state_topic {c['state_topic']}")
    if len(ids) != len(cfg):
        problems.append(f"unique_ids not distinct: {sorted(ids)}")
    if names != {"Label", "speech", "Dog bark", "smoke_alarm"}:
        problems.append(f"entity names {sorted(names)}")
    retained = {t: p for t, p, _ in messages if t.startswith("cony/")}
    if retained.get(f"cony/{NODE}/availability") != "offline":
        problems.append(f"retained availability {retained.get(f'cony/{NODE}/availability')}")
    if retained.get(f"cony/{NODE}/label") != "speech":
        problems.append(f"retained label {retained.get(f'cony/{NODE}/label')}")
    return report(2, f"{len(cfg)} retained discovery configs with Home Assistant's keys",
                  problems, [f"{t}: {p}" for t, p, _ in messages])


def last_will(port):
    """3: SIGKILL while online: the will, "offline", retained."""
    node = "killed"
    topic = f"cony/{node}/availability"
    sub = Subscriber(port, [topic])
    proc = subprocess.Popen(
        ["gst-launch-1.0", "audiotestsrc", "is-live=true", "!", "conymqttsink", f"host={HOST}",
         f"port={port}", "topic=cony/ha/raw", "ha-discovery=true", f"ha-node-id={node}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    online = sub.wait(lambda ms: ms and ms[-1][1] == "online", 10)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    offline = sub.wait(lambda ms: ms and ms[-1][1] == "offline", 10)
    sub.close()
    later = Subscriber(port, [topic])
    later.wait(lambda ms: ms, 2)
    retained = later.close()
    problems = []
    if not online:
        problems.append("never online")
    if not offline:
        problems.append("no offline after the kill")
    if retained[-1:] != [(topic, "offline", True)]:
        problems.append(f"retained {retained}")
    return report(3, "killed publisher: last will offline, retained", problems)


def bad_settings(port, tmp):
    """4: a bad groups line and a bad node id are errors that name them."""
    bad = os.path.join(tmp, "bad-groups.txt")
    with open(bad, "w") as f:
        f.write("# groups\nbark = Bark; Dog\njust a label\n")
    problems = []
    for props, want in ((["ha-discovery=true", f"ha-groups-file={bad}"],
                         f"{bad}, line 3: expected 'name = model label"),
                        (["ha-discovery=true", "ha-node-id=a/b"], "ha-node-id 'a/b'")):
        p = subprocess.run(["gst-launch-1.0", "fakesrc", "num-buffers=1", "!", "conymqttsink",
                            f"host={HOST}", f"port={port}", *props],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0 or want not in p.stdout + p.stderr:
            problems.append(f"{props}: exit {p.returncode}, no '{want}'")
    return report(4, "bad groups file line and node id named", problems)


def main():
    if not os.path.exists(mqttbroker.MOSQUITTO):
        print("1..0 # SKIP mosquitto not installed")
        return 77
    Gst.init(None)
    if Gst.ElementFactory.find("conymqttsink") is None:
        print("1..0 # SKIP conymqttsink not built (no libmosquitto-dev)")
        return 77
    tmp = tempfile.mkdtemp()
    groups = os.path.join(tmp, "groups.txt")
    with open(groups, "w") as f:
        f.write(GROUPS)
    port = mqttbroker.free_port()
    broker = mqttbroker.Broker(tmp, [f"listener {port} {HOST}\nallow_anonymous true"])
    ok = True
    try:
        broker.start()
        ok &= states(port, groups)
        ok &= configs(port)
        ok &= last_will(port)
        ok &= bad_settings(port, tmp)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..4")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
