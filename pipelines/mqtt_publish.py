#!/usr/bin/python3
"""Publishes every classification result to an MQTT broker, one JSON message per step.

    pipelines/mqtt_publish.py [SOURCE] [--host H] [--port P] [--topic T] [options]

SOURCE and the model options are print_results.py's (a file, URI, `mic`, `test` or a
GStreamer source description). Each `conytransformer` bus message becomes the same
JSON object `json.sh` prints, published to TOPIC (default `cony/results`) as it is
posted.

Delivery: QoS 1 (at least once) by default. paho-mqtt keeps every QoS 1 message in
memory until the broker acknowledges it: while the broker is unreachable the results
are queued (up to --max-queued, default 100000, about 7 hours at 4 steps per second;
beyond that new results are dropped and counted on stderr) and sent in order once the
client has reconnected (it retries every --reconnect-min .. --reconnect-max seconds).
A message whose acknowledgement was lost is sent again, so a subscriber may see a
step twice: the `step` field tells (it only grows within a run). Nothing is lost on
the publishing side. For the subscriber's side to survive a broker restart too, run
the broker with persistence and subscribe with QoS 1 and a persistent session
(clean_session=False, a fixed client id): tests/test_mqtt_publish.py does exactly that.
QoS 0 (--qos 0) sends fire-and-forget and drops whatever is produced while disconnected.

At the end of the stream it waits (up to --drain-timeout seconds) until the broker has
acknowledged every result, then prints "published N results" on stderr; connection
changes are reported on stderr as they happen. Needs Debian's python3-paho-mqtt
(paho-mqtt 1.6) besides print_results.py's packages.
"""

import argparse
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt

import print_results
from print_results import GLib

PROG = "mqtt_publish.py"


def log(text):
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


class Publisher:
    """A paho client in its own network thread, counting what the broker acknowledged."""

    def __init__(self, args):
        self.topic = args.topic
        self.qos = args.qos
        self.lock = threading.Lock()
        self.unacked = set()     # mids published and not acknowledged yet
        self.acked_early = set() # acknowledged before publish() returned its mid
        self.sent = self.dropped = self.connects = 0
        self.client = mqtt.Client(client_id=args.client_id, clean_session=True)
        self.client.max_queued_messages_set(args.max_queued)
        self.client.reconnect_delay_set(args.reconnect_min, args.reconnect_max)
        self.client.on_connect = self.on_connect
        self.client.on_disconnect = self.on_disconnect
        self.client.on_publish = self.on_publish
        self.where = f"{args.host}:{args.port}"
        self.client.connect_async(args.host, args.port, keepalive=args.keepalive)
        self.client.loop_start()

    def on_connect(self, client, userdata, flags, rc):
        if rc != 0:
            log(f"broker {self.where} refused the connection: {mqtt.connack_string(rc)}")
            return
        self.connects += 1
        with self.lock:
            waiting = len(self.unacked)
        log(("connected to " if self.connects == 1 else "reconnected to ") + self.where
            + (f"; sending {waiting} queued results" if waiting else ""))

    def on_disconnect(self, client, userdata, rc):
        if rc != 0:
            log(f"lost the connection to {self.where}; queueing results until it is back")

    def on_publish(self, client, userdata, mid):
        with self.lock:
            if mid in self.unacked:
                self.unacked.discard(mid)
            else:
                self.acked_early.add(mid)

    def publish(self, record):
        info = self.client.publish(self.topic, json.dumps(record), qos=self.qos)
        if info.rc == mqtt.MQTT_ERR_QUEUE_SIZE:
            self.dropped += 1
            log(f"queue full (--max-queued): dropped step {record.get('step')}")
            return
        self.sent += 1
        if self.qos == 0:
            return
        with self.lock:
            if info.mid in self.acked_early:
                self.acked_early.discard(info.mid)
            else:
                self.unacked.add(info.mid)

    def drain(self, timeout):
        """Waits until every QoS 1 result is acknowledged; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.unacked:
                    return True
            time.sleep(0.05)
        return False

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    print_results.add_pipeline_arguments(ap)
    ap.add_argument("--host", default="127.0.0.1", help="broker address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=1883)
    ap.add_argument("--topic", default="cony/results")
    ap.add_argument("--qos", type=int, choices=[0, 1], default=1)
    ap.add_argument("--client-id", default="", help="MQTT client id (default: random)")
    ap.add_argument("--keepalive", type=int, default=10,
                    help="seconds; a dead broker is noticed after about 1.5 times this")
    ap.add_argument("--max-queued", type=int, default=100000,
                    help="results kept in memory while disconnected (0: no limit)")
    ap.add_argument("--reconnect-min", type=float, default=0.25)
    ap.add_argument("--reconnect-max", type=float, default=4.0)
    ap.add_argument("--drain-timeout", type=float, default=30.0,
                    help="seconds to wait at the end for the broker's acknowledgements")
    args = ap.parse_args()

    pipeline = print_results.build_pipeline(args, PROG)
    publisher = Publisher(args)
    loop = GLib.MainLoop()

    def on_result(record):
        publisher.publish(record)
        return True

    rc = print_results.run(pipeline, loop, PROG, on_result)
    if not publisher.drain(args.drain_timeout):
        log(f"{len(publisher.unacked)} results not acknowledged by {publisher.where} "
            f"after {args.drain_timeout:g} s")
        rc = rc or 1
    publisher.close()
    log(f"published {publisher.sent} results to {publisher.where} topic {args.topic}"
        + (f", dropped {publisher.dropped}" if publisher.dropped else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
