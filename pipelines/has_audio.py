#!/usr/bin/python3
"""Says whether a media file or URI has an audio stream, before a classifier pipeline is
built for it: asked of GStreamer's discoverer (GstPbutils), which looks at every stream
without linking any of them, so a video-only file is told apart without relying on
uridecodebin's delayed-linking failure (not-linked) in the real pipeline.

    pipelines/has_audio.py FILE|URI [--label TEXT] [--timeout SECONDS]

Exit status:
  0  it has an audio stream (also one that no installed decoder reads: the pipeline
     then names what is missing);
  4  it has streams and none of them is audio: one line on stderr,
     "LABEL: no audio track (it has: video)";
  2  cannot tell (unreadable, unknown format, missing plugins, a stream of unknown kind,
     the timeout, no python3-gi / gir1.2-gst-plugins-base-1.0): why, on stderr. Callers
     then build their pipeline as usual and let its own errors speak.
The discoverer gives up after SECONDS (default 10); a process that hangs anyway (in C,
where Python cannot interrupt it) is ended by SIGALRM 2 s later.
"""

import argparse
import math
import os
import signal
import sys

CANNOT_TELL, NO_AUDIO = 2, 4
HARD_MARGIN_S = 2


class CannotTell(Exception):
    pass


def stream_kinds(source, timeout_s):
    """The kinds of the streams at source (a path or URI): "audio", "video", "image",
    "subtitle" or "other" (a stream the discoverer does not classify). CannotTell when
    it cannot say."""
    try:
        import gi

        gi.require_version("Gst", "1.0")
        gi.require_version("GstPbutils", "1.0")
        from gi.repository import GLib, Gst, GstPbutils
    except (ImportError, ValueError) as e:
        raise CannotTell(f"no GstPbutils ({e})") from e
    Gst.init(None)
    uri = source if Gst.uri_is_valid(source) else Gst.filename_to_uri(os.path.abspath(source))
    discoverer = GstPbutils.Discoverer.new(int(timeout_s * Gst.SECOND))
    try:
        info = discoverer.discover_uri(uri)
    except GLib.Error as e:
        raise CannotTell(e.message) from e
    kinds = []
    for s in info.get_stream_list():
        if isinstance(s, GstPbutils.DiscovererContainerInfo):
            continue
        if isinstance(s, GstPbutils.DiscovererAudioInfo):
            kinds.append("audio")
        elif isinstance(s, GstPbutils.DiscovererVideoInfo):
            kinds.append("image" if s.is_image() else "video")
        elif isinstance(s, GstPbutils.DiscovererSubtitleInfo):
            kinds.append("subtitle")
        else:
            kinds.append("other")
    # Without audio among them, a partial answer (a missing demuxer or decoder may hide
    # the audio stream) or none at all says nothing.
    if "audio" not in kinds and info.get_result() != GstPbutils.DiscovererResult.OK:
        raise CannotTell(f"discoverer result {info.get_result().value_nick}")
    return kinds


def verdict(kinds):
    """True: audio; False: only kinds that are surely not audio; CannotTell otherwise
    (no streams, or an unclassified one that may be audio the discoverer does not know)."""
    if "audio" in kinds:
        return True
    if not kinds or "other" in kinds:
        raise CannotTell(f"streams {kinds or 'none'}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a media file path or URI")
    ap.add_argument("--label",
                    help="start of the no-audio line (default: has_audio.py: SOURCE)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    args = ap.parse_args()
    # SIGALRM's default action ends the process even when it is stuck inside C.
    signal.alarm(math.ceil(args.timeout) + HARD_MARGIN_S)
    label = args.label or f"has_audio.py: {args.source}"
    try:
        kinds = stream_kinds(args.source, args.timeout)
        if verdict(kinds):
            return 0
    except CannotTell as e:
        print(f"has_audio.py: {args.source}: cannot tell: {e}", file=sys.stderr)
        return CANNOT_TELL
    found = ", ".join(sorted(set(kinds)))
    print(f"{label}: no audio track (it has: {found})", file=sys.stderr)
    return NO_AUDIO


if __name__ == "__main__":
    sys.exit(main())
