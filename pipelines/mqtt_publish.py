#!/usr/bin/python3
"""Publishes every classification result to an MQTT broker, one JSON record per message.

    pipelines/mqtt_publish.py [SOURCE] [--host H] [--port P] [--topic T] [options]

SOURCE and the model options are print_results.py's (a file, URI, `mic`, `test` or a
GStreamer source description). The pipeline ends in

    ... ! conytransformer ! conyjson source=SOURCE ! conymqttsink host=H port=P topic=T qos=Q

so each message is a record of docs/results.schema.json (a `stream` record first, a
`result` per step, an `eos` record for the segments EOS closes), published from inside
the pipeline by conymqttsink (libmosquitto; docs/elements.md, "conymqttsink").

Delivery: QoS 1 (at least once) by default. While the broker is unreachable the element
queues the records (up to --max-queued, default 100000, about 7 hours at 4 steps per
second; beyond that new ones are dropped and counted) and sends them in order after the
reconnection (retried every 1 to 4 s); a record whose acknowledgement was lost is sent
again, so a subscriber may see a `step` twice. For the subscriber's side to survive a
broker restart too, run the broker with persistence and subscribe with QoS 1 and a
persistent session (tests/pipelines/test_mqtt_publish.py does). Connection changes are reported
on stderr as they happen. At the end of the stream it waits (up to --drain-timeout
seconds) for the broker's acknowledgements and says on stderr what was published; the
status is 1 when anything was not delivered (the broker refused or was away: "no
connection to H:P") or dropped. Needs the plugin built with libmosquitto (Debian's
libmosquitto-dev) besides print_results.py's packages.
"""

import argparse
import sys

import print_results
from print_results import GLib

PROG = "mqtt_publish.py"


def log(text):
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def gst_quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def sink_description(args):
    """conyjson ! conymqttsink with the options."""
    props = (f"host={gst_quote(args.host)} port={args.port} topic={gst_quote(args.topic)} "
             f"qos={args.qos} keepalive={args.keepalive} max-queued={args.max_queued} "
             f"drain-timeout={int(args.drain_timeout * 1000)}")
    if args.client_id:
        props += f" client-id={gst_quote(args.client_id)}"
    return f"conyjson source={gst_quote(args.source)} ! conymqttsink name=mqtt {props}"


class Connection:
    """Reports the element's connection messages ("conymqttsink") on stderr and keeps
    the last one's counts (the element posts them at EOS too)."""

    def __init__(self, where):
        self.where = where
        self.connects = 0
        self.up = False
        self.queued = None

    def on_element(self, s):
        if s.get_name() != "conymqttsink":
            return
        self.queued = s.get_value("queued")
        up = s.get_value("connected")
        if up and not self.up:
            self.connects += 1
            log(("connected to " if self.connects == 1 else "reconnected to ") + self.where
                + (f"; sending {self.queued} queued results" if self.queued else ""))
        self.up = up


def summary(sink, conn, topic):
    """The closing line and status: 0 only when every record reached the broker."""
    published = sink.get_property("published")
    dropped = sink.get_property("dropped")
    # (the element forgets its queue when stopped: the count at EOS)
    queued = conn.queued if conn.queued is not None else sink.get_property("queued")
    if conn.connects == 0:
        log(f"no connection to {conn.where}: nothing was published; {queued} results not "
            "delivered" + (f", {dropped} dropped" if dropped else ""))
        return 1
    text = f"published {published} results to {conn.where} topic {topic}"
    if queued or dropped:
        log(text + f"; {queued} not delivered, {dropped} dropped (max-queued)")
        return 1
    log(text)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    print_results.add_pipeline_arguments(ap)
    ap.add_argument("--host", default="127.0.0.1", help="broker address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=1883)
    ap.add_argument("--topic", default="cony/results")
    ap.add_argument("--qos", type=int, choices=[0, 1, 2], default=1)
    ap.add_argument("--client-id", default="", help="MQTT client id (default: random)")
    ap.add_argument("--keepalive", type=int, default=10,
                    help="seconds; a dead broker is noticed after about 1.5 times this")
    ap.add_argument("--max-queued", type=int, default=100000,
                    help="results kept while the broker is away (beyond: dropped, counted)")
    ap.add_argument("--drain-timeout", type=float, default=30.0,
                    help="seconds to wait at the end for the broker's acknowledgements")
    args = ap.parse_args()

    pipeline = print_results.build_pipeline(args, PROG, sink=sink_description(args))
    sink = pipeline.get_by_name("mqtt")
    conn = Connection(f"{args.host}:{args.port}")
    loop = GLib.MainLoop()
    rc = print_results.run(pipeline, loop, PROG, lambda record: True, args.source,
                           conn.on_element)
    return summary(sink, conn, args.topic) or rc


if __name__ == "__main__":
    sys.exit(main())
