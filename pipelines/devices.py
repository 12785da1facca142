#!/usr/bin/python3
"""Finds a real microphone or camera with GStreamer's device monitor.

    pipelines/devices.py audio|video [--list]

Prints the gst-launch-1.0 source description of the default (else the first) capture
device of that kind, e.g. `pulsesrc device=alsa_input.usb-...`, and exits 0; with
--list, every device, one per line, with its name after a `#`. When there is none it
says so on stderr and exits 3 (NO_DEVICE, the status every script in pipelines/ gives
for a missing microphone or camera): autoaudiosrc would otherwise fall back to a silent
fake source and the classifier would print confident "silence" lines about nothing.
PulseAudio monitor sources (the sound a machine plays) are not microphones and are
skipped. Needs python3-gi and gir1.2-gstreamer-1.0.
"""

import shlex
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

CLASSES = {"audio": "Audio/Source", "video": "Video/Source"}
WHAT = {"audio": "microphone", "video": "camera"}
# Exit status of every script in pipelines/ (shell and Python) when the capture device
# it needs is missing (pipelines/README.md, "Exit status").
NO_DEVICE = 3


def is_monitor(device):
    props = device.get_properties()
    return props is not None and props.get_string("device.class") == "monitor"


def is_default(device):
    props = device.get_properties()
    if props is None or not props.has_field("is-default"):
        return False
    return bool(props.get_value("is-default"))


def launch_description(device):
    """The source element the device monitor would create, as gst-launch-1.0 text."""
    element = device.create_element(None)
    desc = element.get_factory().get_name()
    if element.find_property("device") is not None:
        value = element.get_property("device")
        if value:
            desc += " device=" + shlex.quote(str(value))
    return desc


def capture_devices(kind):
    """Real capture devices of @kind ("audio" or "video"), the default one first."""
    monitor = Gst.DeviceMonitor.new()
    monitor.add_filter(CLASSES[kind], None)
    if not monitor.start():
        return []
    devices = [d for d in monitor.get_devices() if not is_monitor(d)]
    monitor.stop()
    return sorted(devices, key=lambda d: not is_default(d))


def no_device_message(kind):
    return (f"no {WHAT[kind]} found: GStreamer's device monitor lists no {CLASSES[kind]} "
            "device (a fallback would classify a fake, empty source)")


def require(kind, prog, hint):
    """The launch description of the default device of @kind; none: says so on stderr,
    naming @prog and what to do instead (@hint), and exits NO_DEVICE."""
    devices = capture_devices(kind)
    if not devices:
        print(f"{prog}: {no_device_message(kind)}; {hint}", file=sys.stderr)
        sys.exit(NO_DEVICE)
    return launch_description(devices[0])


def main(argv):
    usage = "usage: devices.py audio|video [--list]"
    if argv[:1] in (["-h"], ["--help"]):
        print(usage + "\n\n" + __doc__.strip())
        return 0
    if len(argv) < 1 or argv[0] not in CLASSES or argv[1:] not in ([], ["--list"]):
        print(usage, file=sys.stderr)
        return 2
    kind = argv[0]
    Gst.init(None)
    devices = capture_devices(kind)
    if not devices:
        print(no_device_message(kind), file=sys.stderr)
        return NO_DEVICE
    for d in devices if argv[1:] else devices[:1]:
        print(launch_description(d) + (f"  # {d.get_display_name()}" if argv[1:] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
