"""Synthesised music for training: a short piece composed at random in one of ten styles,
written as a standard MIDI file and played by FluidSynth with the General MIDI sound font of
Debian's fluid-soundfont-gm (FluidR3, MIT licence).

Why: the held-out music the models miss most is the kind the real training recordings
have little of (distorted-guitar rock and metal, electronic loops), and they hear it as
noise. Chords, a bass line, a melody and a drum kit through GM instruments are music in
any style, and a generator can make as many pieces as wanted. Needs numpy and the
`fluidsynth` binary; everything is decided by the rng passed in, so a clip is a function
of its seed.
"""
import os
import struct
import subprocess

import numpy as np

SOUNDFONT = "/usr/share/sounds/sf2/FluidR3_GM.sf2"
TPQ = 480                        # MIDI ticks per quarter note
DRUMS = 9                        # the GM percussion channel
SATURATE_P = 0.4
BAND_LIMIT_P = 0.25

MAJOR = [0, 2, 4, 5, 7, 9, 11]
MINOR = [0, 2, 3, 5, 7, 8, 10]
# chord progressions as scale degrees (0 = tonic), one chord a bar
PROGRESSIONS = [[0, 4, 5, 3], [5, 3, 0, 4], [0, 3, 4, 3], [0, 5, 3, 4], [1, 4, 0, 5],
                [0, 6, 5, 6], [0, 3, 0, 4], [0, 5, 1, 4], [0, 2, 3, 4], [0, 0, 3, 3]]

# style -> GM programs (0-based) per part, tempo range, scale, drum pattern, chord voicing
STYLES = {
    "metal":      dict(chords=[30, 29], bass=[33, 34], lead=[30, 29], tempo=(110, 200), scale=MINOR,
                       drums="metal", voicing="power", chord_rhythm="chug"),
    "rock":       dict(chords=[29, 30, 27, 25], bass=[33, 34, 35], lead=[29, 30, 81], tempo=(90, 160),
                       scale=MAJOR, drums="rock", voicing="power", chord_rhythm="eighths"),
    "pop":        dict(chords=[0, 4, 27, 5, 24], bass=[33, 38, 35], lead=[0, 73, 80, 56, 65, 11],
                       tempo=(80, 130), scale=MAJOR, drums="pop", voicing="triad", chord_rhythm="beats"),
    "electronic": dict(chords=[88, 89, 90, 81, 94, 50], bass=[38, 39, 87], lead=[80, 81, 84, 87, 82],
                       tempo=(110, 145), scale=MINOR, drums="electronic", voicing="triad",
                       chord_rhythm="offbeat"),
    "orchestral": dict(chords=[48, 49, 61, 52, 60], bass=[43, 42, 58], lead=[40, 73, 71, 56, 68, 60],
                       tempo=(60, 120), scale=MINOR, drums="timpani", voicing="triad", chord_rhythm="held"),
    "ambient":    dict(chords=[88, 89, 91, 92, 94, 95, 52], bass=[89, 38], lead=[8, 14, 11, 98, 79],
                       tempo=(60, 95), scale=MAJOR, drums=None, voicing="triad", chord_rhythm="held"),
    "jazz":       dict(chords=[0, 4, 16, 26], bass=[32, 33], lead=[65, 66, 56, 11, 26, 71],
                       tempo=(90, 190), scale=MAJOR, drums="jazz", voicing="seventh", chord_rhythm="comp"),
    "piano":      dict(chords=[0, 1, 2, 3, 6], bass=None, lead=[0, 1, 2, 3, 6], tempo=(60, 140),
                       scale=MAJOR, drums=None, voicing="triad", chord_rhythm="arpeggio"),
    "folk":       dict(chords=[24, 25, 105, 46], bass=[32, 43], lead=[73, 40, 22, 21, 75, 109],
                       tempo=(80, 140), scale=MAJOR, drums="folk", voicing="triad", chord_rhythm="arpeggio"),
    "chiptune":   dict(chords=[80, 81], bass=[38, 80], lead=[80, 81, 84], tempo=(120, 180), scale=MAJOR,
                       drums="chip", voicing="triad", chord_rhythm="arpeggio_fast"),
}

# drum patterns on a 16-step bar: {GM note: steps}
KICK, SNARE, CLAP, HAT, OPEN_HAT, PEDAL_HAT, CRASH, RIDE, TOM_LO, TOM_HI = 36, 38, 39, 42, 46, 44, 49, 51, 45, 50
CONGA_HI, CONGA_LO, TAMBOURINE, SHAKER, TIMPANI = 62, 64, 54, 70, 47
DRUM_PATTERNS = {
    "rock":       {KICK: [0, 8, 10], SNARE: [4, 12], HAT: list(range(0, 16, 2))},
    "metal":      {KICK: list(range(16)), SNARE: [4, 12], CRASH: [0, 8], RIDE: list(range(0, 16, 2))},
    "pop":        {KICK: [0, 6, 8], SNARE: [4, 12], HAT: list(range(0, 16, 2)), TAMBOURINE: [4, 12]},
    "electronic": {KICK: [0, 4, 8, 12], CLAP: [4, 12], HAT: list(range(16)), OPEN_HAT: [2, 6, 10, 14]},
    "jazz":       {RIDE: [0, 4, 7, 8, 12, 15], PEDAL_HAT: [4, 12], KICK: [0]},
    "folk":       {CONGA_HI: [0, 3, 6, 10, 12], CONGA_LO: [4, 8, 14], SHAKER: list(range(0, 16, 2))},
    "chip":       {KICK: [0, 8], SNARE: [4, 12], HAT: list(range(0, 16, 2))},
    "timpani":    {TIMPANI: [0, 8]},
}


class MidiTrack:
    """Events of one track as (tick, order, bytes); order puts note-offs before note-ons."""

    def __init__(self):
        self.events = []

    def add(self, tick, data, order=1):
        self.events.append((int(tick), order, bytes(data)))

    def program(self, ch, prog, volume=100, pan=64, reverb=40):
        self.add(0, [0xC0 | ch, prog], 0)
        for cc, v in ((7, volume), (10, pan), (91, reverb)):
            self.add(0, [0xB0 | ch, cc, int(np.clip(v, 0, 127))], 0)

    def note(self, ch, key, start, length, vel):
        if not 0 <= key <= 127:
            return
        vel = int(np.clip(vel, 1, 127))
        self.add(start, [0x90 | ch, key, vel], 1)
        self.add(start + max(1, length), [0x80 | ch, key, 0], 0)

    def chunk(self):
        out, last = bytearray(), 0
        for tick, _, data in sorted(self.events, key=lambda e: (e[0], e[1])):
            out += vlq(tick - last) + data
            last = tick
        out += vlq(0) + b"\xff\x2f\x00"
        return b"MTrk" + struct.pack(">I", len(out)) + bytes(out)


def vlq(v):
    """MIDI variable-length quantity."""
    out = [v & 0x7F]
    v >>= 7
    while v:
        out.append(0x80 | (v & 0x7F))
        v >>= 7
    return bytes(reversed(out))


def write_midi(path, tempo_bpm, tracks):
    head = MidiTrack()
    head.add(0, b"\xff\x51\x03" + struct.pack(">I", int(60e6 / tempo_bpm))[1:], 0)
    data = b"MThd" + struct.pack(">IHHH", 6, 1, 1 + len(tracks), TPQ) + head.chunk()
    data += b"".join(t.chunk() for t in tracks)
    with open(path, "wb") as f:
        f.write(data)


def chord_notes(scale, root_key, degree, voicing):
    """MIDI keys of the chord on a scale degree: a power chord, a triad or a seventh."""
    def step(k):
        return root_key + 12 * ((degree + k) // 7) + scale[(degree + k) % 7]
    if voicing == "power":
        return [step(0), step(0) + 7, step(0) + 12]
    return [step(k) for k in ((0, 2, 4, 6) if voicing == "seventh" else (0, 2, 4))]


def compose(rng, seconds):
    """A random piece: (style, tempo, [MidiTrack]) at least `seconds` long."""
    style = str(rng.choice(sorted(STYLES)))
    s = STYLES[style]
    tempo = float(rng.uniform(*s["tempo"]))
    bar = 4 * TPQ
    bars = int(np.ceil(seconds * tempo / 60 / 4)) + 1
    scale = s["scale"] if rng.random() < 0.8 else (MINOR if s["scale"] is MAJOR else MAJOR)
    tonic = 36 + int(rng.integers(0, 12))                       # C2..B2
    prog = PROGRESSIONS[int(rng.integers(len(PROGRESSIONS)))]
    sixteenth = TPQ // 4
    swing = style == "jazz"
    tracks = []

    def humanise(tick):
        return max(0, tick + int(rng.integers(-12, 13)))

    # chords
    t = MidiTrack()
    ch = 0
    t.program(ch, int(rng.choice(s["chords"])), volume=int(rng.integers(70, 110)), pan=int(rng.integers(30, 98)))
    octave = 12 if s["voicing"] == "power" else 24
    for b in range(bars):
        keys = [k + octave for k in chord_notes(scale, tonic, prog[b % len(prog)], s["voicing"])]
        r = s["chord_rhythm"]
        if r == "held":
            hits = [(0, bar)]
        elif r == "beats":
            hits = [(i * TPQ, TPQ - 20) for i in range(4)]
        elif r == "eighths":
            hits = [(i * TPQ // 2, TPQ // 2 - 15) for i in range(8)]
        elif r == "chug":
            hits = [(i * sixteenth, sixteenth - 10) for i in range(16) if rng.random() < 0.8]
        elif r == "offbeat":
            hits = [(i * TPQ + TPQ // 2, TPQ // 3) for i in range(4)]
        elif r == "comp":
            hits = [(int(rng.integers(0, 8)) * TPQ // 2, TPQ // 2) for _ in range(3)]
        else:                                                   # arpeggios: one key at a time
            per = sixteenth if r == "arpeggio_fast" else TPQ // 2
            order = keys + keys[1:-1][::-1]
            for i in range(bar // per):
                t.note(ch, order[i % len(order)], humanise(b * bar + i * per), per, rng.integers(60, 100))
            continue
        for start, length in hits:
            for k in keys:
                t.note(ch, k, humanise(b * bar + start), length, rng.integers(60, 105))
    tracks.append(t)

    # bass: the chord's root, on beats or eighths (a walking line for jazz)
    if s["bass"]:
        t = MidiTrack()
        t.program(1, int(rng.choice(s["bass"])), volume=int(rng.integers(80, 115)))
        per = TPQ // 2 if style in ("metal", "rock", "electronic", "chiptune") else TPQ
        for b in range(bars):
            root = chord_notes(scale, tonic, prog[b % len(prog)], "triad")[0]
            for i in range(bar // per):
                key = root
                if style == "jazz":
                    key = tonic + 12 * ((prog[b % len(prog)] + i) // 7) + scale[(prog[b % len(prog)] + i) % 7]
                t.note(1, key, humanise(b * bar + i * per), per - 20, rng.integers(70, 110))
        tracks.append(t)

    # melody: a walk on the scale, chord tones likelier on beats, some rests
    if rng.random() < 0.85:
        t = MidiTrack()
        t.program(2, int(rng.choice(s["lead"])), volume=int(rng.integers(75, 120)), pan=int(rng.integers(20, 108)))
        pos, total = 0, bars * bar
        degree = int(rng.integers(0, 7))
        base = tonic + 24 + (12 if rng.random() < 0.5 else 0)
        while pos < total:
            length = int(rng.choice([TPQ // 4, TPQ // 2, TPQ // 2, TPQ, TPQ, TPQ * 3 // 2, TPQ * 2]))
            if rng.random() > 0.15:
                degree = int(np.clip(degree + int(rng.choice([-2, -1, -1, 0, 1, 1, 2, 3, -3])), -3, 10))
                key = base + 12 * (degree // 7) + scale[degree % 7]
                t.note(2, key, humanise(pos), length - 10, rng.integers(70, 115))
            pos += length
        tracks.append(t)

    # drums
    if s["drums"]:
        t = MidiTrack()
        channel = DRUMS
        pattern = dict(DRUM_PATTERNS[s["drums"]])
        if s["drums"] == "timpani":                             # timpani is a melodic program
            channel = 3
            t.program(channel, 47, volume=100)
        for b in range(bars):
            for key, steps in pattern.items():
                for st in steps:
                    if rng.random() < 0.07:                     # a dropped hit now and then
                        continue
                    tick = b * bar + st * sixteenth
                    if swing and st % 4 == 3:
                        tick -= sixteenth // 3
                    note = key if channel == DRUMS else tonic - 12 + (0 if st == 0 else 7)
                    accent = 20 if st % 4 == 0 else 0
                    t.note(channel, note, humanise(tick), sixteenth, rng.integers(60, 100) + accent)
            if b % 4 == 3 and channel == DRUMS and rng.random() < 0.5:   # a fill into the next bar
                for st in range(12, 16):
                    t.note(channel, int(rng.choice([SNARE, TOM_LO, TOM_HI])), b * bar + st * sixteenth,
                           sixteenth, rng.integers(80, 120))
        tracks.append(t)
    return style, tempo, tracks


def render_synth_music(rng, clip_s, tmpdir, decode):
    """A clip of synthesised music: compose, write MIDI, play with fluidsynth at 16 kHz
    (reverb and chorus on or off), cut clip_s seconds after a random lead-in. decode reads
    the WAV fluidsynth wrote (the builder's sox decoder). Returns (samples, detail)."""
    style, tempo, tracks = compose(rng, clip_s + 1.5)
    tag = "%d_%d" % (os.getpid(), int(rng.integers(0, 1 << 30)))
    mid = os.path.join(tmpdir, "music_%s.mid" % tag)
    wav = os.path.join(tmpdir, "music_%s.wav" % tag)
    write_midi(mid, tempo, tracks)
    reverb = rng.random() < 0.7
    chorus = rng.random() < 0.4
    cmd = ["fluidsynth", "-n", "-i", "-q", "-r", "16000", "-g", "0.6", "-R", "1" if reverb else "0",
           "-C", "1" if chorus else "0", "-o", "synth.reverb.room-size=%.2f" % rng.uniform(0.2, 0.9),
           "-F", wav, "-T", "wav", "-O", "s16", SOUNDFONT, mid]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if p.returncode != 0 or not os.path.exists(wav):
            raise RuntimeError("fluidsynth failed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        x = decode(wav)
    finally:
        for f in (mid, wav):
            if os.path.exists(f):
                os.unlink(f)
    n = int(clip_s * 16000)
    lead = int(rng.uniform(0.2, 1.0) * 16000)
    x, post = colour(rng, x[lead:lead + n])
    detail = "fluidsynth %s %.0f bpm%s%s%s" % (style, tempo, " reverb" if reverb else "",
                                            " chorus" if chorus else "", post)
    return x, detail


def colour(rng, x):
    """What recordings and playback do to music, at random: overdrive or clipping (loud
    masters, distorted guitars: a clean GM mix is not heard as noise even by a model that
    hears such music as noise) and band limits (small speakers, telephones, old radios)."""
    post = ""
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak > 0 and rng.random() < SATURATE_P:
        drive = float(np.exp(rng.uniform(np.log(2.0), np.log(40.0))))
        x = np.tanh(drive * x / peak) * peak
        post += " drive=%.0f" % drive
    if rng.random() < BAND_LIMIT_P:
        lo = float(rng.choice([0.0, rng.uniform(150, 600)]))
        hi = float(rng.uniform(2500, 7000))
        spec = np.fft.rfft(x)
        f = np.fft.rfftfreq(len(x), 1 / 16000)
        spec[(f < lo) | (f > hi)] = 0
        x = np.fft.irfft(spec, len(x))
        post += " band=%.0f-%.0f Hz" % (lo, hi)
    return x, post
