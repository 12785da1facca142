#!/usr/bin/python3
"""conymqttsink's credentials and TLS against a real mosquitto on 127.0.0.1 (free ports),
with a password file (mosquitto_passwd) and a throwaway CA, server and client
certificates made here with openssl. Each case runs gst-launch-1.0 with 5 buffers into
conymqttsink and counts what a subscriber (an anonymous plain listener of the same broker)
receives:

  right password / password-file: 5 delivered; wrong or no password: an error naming
  CONNACK 5; an unreadable password file, a key file without a key, half a client
  certificate: an error naming the file or setting, at start; TLS with the CA: delivered;
  a wrong CA, a certificate for another host name, `tls` with only the system's CAs: an
  error naming "certificate verify failed", within seconds; `tls-insecure` accepts the
  other host name; a listener that requires a client certificate: an error without one,
  delivered with one.

TAP output; skipped (77) without mosquitto, mosquitto_passwd, openssl, python3-paho-mqtt
or conymqttsink.
"""

import os
import shutil
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mqttbroker  # noqa: E402
from mqttbroker import HOST  # noqa: E402

N = 5


class Subscriber:
    """Counts the messages on every topic (QoS 1)."""

    def __init__(self, port):
        self.counts = {}
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.client = mqtt.Client()
        self.client.on_connect = lambda c, u, f, rc: c.subscribe("cony/#", qos=1)
        self.client.on_subscribe = lambda *a: self.ready.set()
        self.client.on_message = self.on_message
        self.client.connect(HOST, port)
        self.client.loop_start()
        if not self.ready.wait(10):
            raise RuntimeError("the subscriber did not subscribe")

    def on_message(self, client, userdata, msg):
        with self.lock:
            self.counts[msg.topic] = self.counts.get(msg.topic, 0) + 1

    def count(self, topic, want, seconds=5):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.counts.get(topic, 0) >= want:
                    break
            time.sleep(0.05)
        with self.lock:
            return self.counts.get(topic, 0)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def publish(port, topic, props):
    """gst-launch-1.0 with N buffers into conymqttsink: (exit status, output, seconds)."""
    cmd = ["gst-launch-1.0", "audiotestsrc", f"num-buffers={N}", "samplesperbuffer=16", "!",
           "conymqttsink", f"host={HOST}", f"port={port}", f"topic={topic}", "qos=1",
           "drain-timeout=5000", *props]
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=40)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", str(e.stdout or "") + str(e.stderr or "")
    return rc, out, time.monotonic() - start


def main():
    for tool in ("mosquitto_passwd", "openssl"):
        if shutil.which(tool) is None:
            print(f"1..0 # SKIP {tool} not installed")
            return 77
    if not os.path.exists(mqttbroker.MOSQUITTO):
        print("1..0 # SKIP mosquitto not installed")
        return 77
    if subprocess.run(["gst-inspect-1.0", "conymqttsink"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        print("1..0 # SKIP conymqttsink not built (no libmosquitto-dev)")
        return 77

    tmp = tempfile.mkdtemp()
    pj = lambda name: os.path.join(tmp, name)  # noqa: E731
    subprocess.run(["mosquitto_passwd", "-c", "-b", pj("passwd"), "cony", "s3cret"], check=True)
    with open(pj("pwfile"), "w") as f:
        f.write("s3cret\n")
    ca = mqttbroker.make_ca(tmp, "ca")
    wrong_ca = mqttbroker.make_ca(tmp, "wrongca")
    server = mqttbroker.make_cert(tmp, "server", ca, "IP:127.0.0.1,DNS:localhost")
    other = mqttbroker.make_cert(tmp, "other", ca, "DNS:other.invalid")
    client = mqttbroker.make_cert(tmp, "client", ca)

    plain, auth, tls, tls_other, tls_client = (mqttbroker.free_port() for _ in range(5))
    tls_conf = "certfile {}\nkeyfile {}\n"
    broker = mqttbroker.Broker(tmp, [
        f"listener {plain} {HOST}\nallow_anonymous true",
        f"listener {auth} {HOST}\nallow_anonymous false\npassword_file {pj('passwd')}",
        f"listener {tls} {HOST}\nallow_anonymous true\n" + tls_conf.format(*server),
        f"listener {tls_other} {HOST}\nallow_anonymous true\n" + tls_conf.format(*other),
        f"listener {tls_client} {HOST}\nallow_anonymous true\n" + tls_conf.format(*server)
        + f"cafile {ca[0]}\nrequire_certificate true",
    ])
    ca_file, wrong_file = f"tls-ca-file={ca[0]}", f"tls-ca-file={wrong_ca[0]}"
    client_cert = [f"tls-cert-file={client[0]}", f"tls-key-file={client[1]}"]
    # name, port, properties, None (all delivered) or the strings the error must hold
    cases = [
        ("right password", auth, ["username=cony", "password=s3cret"], None),
        ("password-file", auth, ["username=cony", f"password-file={pj('pwfile')}"], None),
        ("wrong password", auth, ["username=cony", "password=wrong"],
         ["refused the connection: CONNACK 5", "not authorised", "as user cony"]),
        ("no credentials", auth, [], ["CONNACK 5"]),
        ("unreadable password-file", auth, ["username=cony", f"password-file={pj('none')}"],
         ["Cannot read the MQTT password file", pj("none")]),
        ("password without username", auth, ["password=s3cret"], ["needs a username"]),
        ("TLS with the CA", tls, [ca_file], None),
        ("TLS, wrong CA", tls, [wrong_file], ["TLS with the MQTT broker failed",
                                              "certificate verify failed"]),
        ("TLS, system CAs only", tls, ["tls=true"], ["certificate verify failed"]),
        ("TLS, certificate for another host", tls_other, [ca_file],
         ["certificate verify failed"]),
        ("TLS, another host, tls-insecure", tls_other, [ca_file, "tls-insecure=true"], None),
        ("client certificate required, none", tls_client, [ca_file],
         ["TLS with the MQTT broker failed", "certificate"]),
        ("client certificate required, given", tls_client, [ca_file, *client_cert], None),
        ("client certificate without key", tls_client, [ca_file, client_cert[0]],
         ["needs both tls-cert-file and tls-key-file"]),
        ("key file holds no key", tls_client, [ca_file, client_cert[0],
                                               f"tls-key-file={ca[0]}"],
         ["Unusable MQTT tls-key-file", "no PEM private key"]),
        ("unreadable CA file", tls, [f"tls-ca-file={pj('none.crt')}"],
         ["Cannot read the MQTT tls-ca-file", pj("none.crt")]),
    ]
    ok = True
    try:
        broker.start()
        sub = Subscriber(plain)
        for n, (name, port, props, errors) in enumerate(cases, 1):
            topic = f"cony/auth/{n}"
            rc, out, took = publish(port, topic, props)
            got = sub.count(topic, N if errors is None else 1, 5 if errors is None else 0.5)
            problems = []
            if errors is None:
                if rc != 0 or got != N:
                    problems.append(f"exit {rc}, {got} of {N} delivered")
            else:
                if rc == 0 or got != 0:
                    problems.append(f"exit {rc}, {got} delivered: want an error")
                problems += [f"the error does not say '{e}'" for e in errors if e not in out]
                if took > 15:
                    problems.append(f"the error took {took:.1f} s")
                if "password=s3cret" not in props and "s3cret" in out:
                    problems.append("the password is in the output")
            ok &= not problems
            print(f"{'not ok' if problems else 'ok'} {n} {name}: exit {rc}, {got} delivered, "
                  f"{took:.1f} s" + ("; " + "; ".join(problems) if problems else ""))
            if problems:
                for line in out.splitlines()[-8:]:
                    print(f"# {line}")
        sub.close()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{len(cases)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
