"""A throwaway mosquitto on 127.0.0.1 for the MQTT tests: free ports, a private directory,
optional password file and TLS material made here with mosquitto_passwd and openssl."""

import os
import shutil
import signal
import socket
import subprocess
import time

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_ca(workdir, name):
    """A self-signed CA: (cert path, key path)."""
    crt, key = os.path.join(workdir, name + ".crt"), os.path.join(workdir, name + ".key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", f"/CN={name}")
    return crt, key


def make_cert(workdir, name, ca, san=None):
    """A certificate for @name signed by @ca (cert, key), with subjectAltName @san:
    (cert path, key path)."""
    crt, key = os.path.join(workdir, name + ".crt"), os.path.join(workdir, name + ".key")
    csr = os.path.join(workdir, name + ".csr")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    args = ["x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", crt, "-days", "2"]
    if san:
        ext = os.path.join(workdir, name + ".ext")
        with open(ext, "w") as f:
            f.write(f"subjectAltName={san}\n")
        args += ["-extfile", ext]
    openssl(*args)
    return crt, key


class Broker:
    """mosquitto with the listeners given as config text blocks (per_listener_settings),
    each starting with `listener PORT 127.0.0.1`. persistence: keep state across stop()
    and start()."""

    def __init__(self, workdir, listeners, persistence=False):
        self.conf = os.path.join(workdir, "mosquitto.conf")
        self.log = os.path.join(workdir, "mosquitto.log")
        self.ports = [int(block.split()[1]) for block in listeners]
        with open(self.conf, "w") as f:
            f.write(f"per_listener_settings true\nlog_dest file {self.log}\n")
            if persistence:
                f.write(f"persistence true\npersistence_location {workdir}/\n")
            # as root it would switch to user mosquitto, which cannot read our directory
            if os.geteuid() == 0:
                f.write("user root\n")
            for block in listeners:
                f.write(block.strip() + "\n")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        for port in self.ports:
            while True:
                try:
                    socket.create_connection((HOST, port), timeout=0.2).close()
                    break
                except OSError:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"mosquitto exited with {self.proc.returncode}: "
                                           + open(self.log).read()[-500:])
                    if time.monotonic() > deadline:
                        raise RuntimeError("mosquitto did not open its ports")
                    time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # saves its persistence file
            self.proc.wait(timeout=10)
