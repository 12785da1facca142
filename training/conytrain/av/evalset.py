"""Issue 54's evaluation set for the fused model (models/av/): sounds and photographs from
Debian packages that no fused or audio model of models/av/ was trained, validated or
tuned on (none of them is in sources.SOURCES; each checked with shared/tools/reserved.sh).

The sound's class is the truth. Every scene's sound is one of this set's clips, in one of
CONDITIONS (clean, pink noise at 20 / 10 / 0 / -5 dB SNR, 25 dB quieter, clipped); its
picture is PICTURES' matched (a photograph of the sound's class), unrelated (of another
class, quiet ones included: a picture of nothing in particular) or absent (no camera).
The scenes, clips, offsets and shots are the same in every cell of the grid (one seeded
draw), so cells differ only in the sound's condition and the picture.

    WORK/evalset.npz: audio (conditions, clips, AUDIO_STEPS, 1024), audio_cls,
                      audio_group, video (shots, SHOT_STEPS, 1280), video_cls, video_group

Sounds (16 kHz, media.py's decoding, looping and class levels, as training):
  talking  qabcs-data's spoken words (grouped by language), asterisk-core-sounds-fr-wav's
           and -it-wav's prompts (a speaker each);
  music    qabcs-data's instrument recordings, singularity-music;
  noise    qabcs-data's vehicle and machine recordings, dustracing2d-data (cars),
           crrcsim-data (model aircraft), micropolis-data (traffic, trains, a bulldozer);
  animal   qabcs-data's animal calls (QUIET_ANIMALS left out: not calls);
  quiet    the noise recordings 60 to 90 dB down and synthesised room floors.
Pictures (media.py's virtual camera; cutouts on a quiet photograph or a flat colour):
  talking  qabcs-data's people (PEOPLE), python3-scipy's "ascent" (people on stairs);
  music    qabcs-data's instruments; noise: qabcs-data's vehicles and machines (MACHINES);
  animal   qabcs-data's animals, python3-scipy's "face" (a raccoon);
  quiet    qabcs-data's food (still objects) and tuxpaint-data's photographic templates (landscapes, bark, rocks; its sheep,
           jellyfish and wool mill are animal and noise).
"""

import glob
import json
import os
import subprocess
import tempfile

import numpy as np

from conytrain.av import build, media, sources
from conytrain.av.train import SCENE, scores

CONDITIONS = ["clean", "snr20", "snr10", "snr0", "snr-5", "level-25", "clipped"]
PICTURES = ["matched", "unrelated", "absent"]
PACKAGES = ["qabcs-data", "asterisk-core-sounds-fr-wav", "asterisk-core-sounds-it-wav",
            "singularity-music", "dustracing2d-data", "crrcsim-data", "micropolis-data",
            "tuxpaint-data"]
QA = "usr/share/qabcs/abcs"
PEOPLE = {"chef", "schooler", "clown", "gamekeeper", "sailorboy"}
MACHINES = {"airplane", "train", "helicopter", "excavator", "tractor", "rocket",
            "quadrocopter", "crane", "steam_locomotive", "fire"}
# qabcs "animal" recordings that are not an animal's call (placeholders, rustles)
QUIET_ANIMALS = {"fish", "snail", "urchin", "ladybug", "newt", "turtle", "weevil",
                 "blister_beetle", "moth", "iguana", "giraffe", "aesculapian_snake", "python",
                 "angelfish"}
NOT_MUSIC = {"sound", "quarter_note", "ratchet", "jack"}
# steady engines and traffic (the rest of these games' sounds are hits, clicks, speech)
NOISES = ["usr/share/games/dustracing2d/sounds/carEngine.ogg",
          "usr/share/games/crrcsim/sounds/*.wav",
          *[f"usr/share/games/micropolis/res/sounds/{n}.wav" for n in
            ("heavytraffic", "rail", "bulldozer")]]
# tuxpaint-data's photographic templates (its starters are drawings)
TUXPAINT_TEMPLATES = {
    "quiet": ["burnt_bark", "cliff", "corn_maze", "lighthouse", "mossy_bark", "mossy_log",
              "mudstone", "redwoods_above", "rocks", "sun_behind_clouds", "sun_behind_leaves",
              "trees_above", "trees_at_dusk"],
    "animal": ["sheep", "jellyfish"], "noise": ["wool_mill_machine"]}
CLIPS_PER_LANGUAGE = 5
SHOTS_PER_CLASS = 24
QUIET_SYNTH = 12
SCIPY = "/usr/lib/python3/dist-packages/scipy/misc"


def _stem(p):
    return os.path.splitext(os.path.basename(p))[0]


def _files(root, pattern):
    hits = sorted(glob.glob(os.path.join(root, pattern), recursive=True))
    if not hits:
        raise RuntimeError(f"{pattern}: nothing under {root} (unpack its package)")
    return hits


def sounds(root):
    """[(cls, group, kind, path)]: kind "sound" (one recording) or "speech" (an utterance,
    grouped by speaker or language)."""
    out = []
    pics = {_stem(p): os.path.basename(os.path.dirname(p))
            for p in _files(root, f"{QA}/all/pics/*/*.png")}
    for p in _files(root, f"{QA}/all/noises/*.ogg"):
        n, where = _stem(p), pics.get(_stem(p))
        cls = ("animal" if where == "animals" and n not in QUIET_ANIMALS else
               "music" if where == "instrument" and n not in NOT_MUSIC else
               "noise" if n in MACHINES else None)
        if cls:
            out.append((cls, f"qabcs:{n}", "sound", p))
    for p in _files(root, f"{QA}/*/sounds/words/*.ogg"):
        out.append(("talking", "qabcs-lang:" + p.split("/abcs/")[1].split("/")[0], "speech", p))
    for p in _files(root, "usr/share/asterisk/sounds/fr*/*.wav"):
        out.append(("talking", "asterisk:fr", "speech", p))
    for p in _files(root, "usr/share/asterisk/sounds/it*/*.wav"):
        out.append(("talking", "asterisk:it", "speech", p))
    for p in _files(root, "usr/share/games/singularity/music/*.ogg"):
        out.append(("music", f"singularity:{_stem(p)}", "sound", p))
    for pat in NOISES:
        for p in _files(root, pat):
            out.append(("noise", f"{pat.split('/')[3]}:{_stem(p)}", "sound", p))
    return out


def pictures(root):
    """[(cls, group, kind, path)]: kind "photo" or "cutout" (transparent background)."""
    out = []
    for p in _files(root, f"{QA}/all/pics/*/*.png"):
        n, where = _stem(p), os.path.basename(os.path.dirname(p))
        cls = ("animal" if where == "animals" else "music" if where == "instrument" else
               "talking" if n in PEOPLE else "noise" if n in MACHINES else
               "quiet" if where == "food" else None)
        if cls:
            out.append((cls, f"qabcs:{n}", "cutout", p))
    out += [("talking", "scipy:ascent", "scipy", f"{SCIPY}/ascent.dat"),
            ("animal", "scipy:face", "scipy", f"{SCIPY}/face.dat")]
    for cls, names in TUXPAINT_TEMPLATES.items():
        for n in names:
            p = _files(root, f"usr/share/tuxpaint/templates/{n}.jpg")[0]
            out.append((cls, f"photo:{n}", "photo", p))
    return out


def load_picture(kind, path):
    if kind != "scipy":
        return media.load_picture(path, kind)
    import bz2
    import pickle
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith("face.dat"):
        img = np.frombuffer(bz2.decompress(raw), np.uint8).reshape(768, 1024, 3)
    else:
        img = np.asarray(pickle.loads(raw), np.uint8)
        img = np.repeat(img[:, :, None], 3, axis=2)
    from PIL import Image
    im = Image.fromarray(img).resize((media.PHOTO_W, media.PHOTO_H), Image.BILINEAR)
    return np.asarray(im, np.float32)


def pink(n, rng):
    """Pink (1/f power) noise of n samples, unit RMS."""
    f = np.fft.rfftfreq(n, 1 / media.RATE)
    spec = (rng.standard_normal(len(f)) + 1j * rng.standard_normal(len(f)))
    spec /= np.sqrt(np.maximum(f, 20.0))
    x = np.fft.irfft(spec, n)
    return (x / np.sqrt(np.mean(x ** 2))).astype(np.float32)


def degrade(x, cond, rng):
    """x under one of CONDITIONS (noise relative to x's own RMS; the result's peaks kept
    within +-1 as a 16-bit file holds them)."""
    if cond == "clean":
        return x
    if cond.startswith("snr"):
        snr = float(cond[3:])
        y = x + pink(len(x), rng) * 10 ** ((media.rms_db(x) - snr) / 20)
    elif cond == "level-25":
        y = x * 10 ** (-25 / 20)
    elif cond == "clipped":
        y = np.clip(x * 10 ** (24 / 20), -0.5, 0.5)
    else:
        raise ValueError(f"unknown condition {cond!r}")
    return np.clip(y, -1, 1).astype(np.float32)


def sound_clips(items, rng):
    """[(cls, group, clip)]: media.py's clips of each recording at a level of its class,
    the noise recordings also 60 to 90 dB down (quiet), speech CLIPS_PER_LANGUAGE clips a
    speaker or language, and QUIET_SYNTH synthesised floors."""
    out, speech = [], {}
    for cls, group, kind, path in items:
        if kind == "speech":
            speech.setdefault(group, []).append(path)
            continue
        x = media.decode(path)
        for c in media.clips_of(dict(cls=cls), x, rng, n_long=2):
            out.append((cls, group, media.set_level(c, cls, rng)))
            if cls == "noise":
                out.append(("quiet", group, media.set_level(c, "quiet", rng)))
    for group in sorted(speech):
        files = speech[group]
        pick = rng.choice(len(files), size=min(30, len(files)), replace=False)
        utts = [u for u in (media.trim(media.decode(files[i])) for i in sorted(pick))
                if len(u) > media.RATE // 5]
        if len(utts) < 3:
            continue
        for c in media.speech_clips(utts, CLIPS_PER_LANGUAGE, rng):
            out.append(("talking", group, media.set_level(c, "talking", rng)))
    for i in range(QUIET_SYNTH):
        out.append(("quiet", f"synth:{i}", media.set_level(media.synth_floor(rng), "quiet", rng)))
    return out


def camera_shots(items, rng):
    """[(cls, group, frames)]: SHOTS_PER_CLASS shots a class, round robin over its
    pictures from a seeded order; cutouts on this set's quiet photographs."""
    backs = [load_picture(k, p) for c, _, k, p in items if c == "quiet" and k == "photo"]
    out = []
    for cls in sources.CLASSES:
        pics = [it for it in items if it[0] == cls]
        order = rng.permutation(len(pics))
        for k in range(max(SHOTS_PER_CLASS, len(pics) if cls == "talking" else 0)):
            c, group, kind, path = pics[order[k % len(pics)]]
            img = load_picture(kind, path)
            out.append((cls, group, media.shot(img, "cutout" if kind == "cutout" else "photo",
                                               backs, rng)))
    return out


def conditions_of(clips, rng):
    """(cond, [(cls, group, clip under cond)]) for each of CONDITIONS in turn, drawing
    the noise from @rng in build_set's order."""
    for cond in CONDITIONS:
        yield cond, [(c, g, degrade(x, cond, rng)) for c, g, x in clips]


def build_set(root, work, cony, audio_cnn, video_cnn, seed=54, precision="auto"):
    """Writes WORK/evalset.npz (skipped when there) and WORK/evalset.json (the files)."""
    dst = os.path.join(work, "evalset.npz")
    if os.path.exists(dst):
        return
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(seed)
    snd, pics = sounds(root), pictures(root)
    with open(os.path.join(work, "evalset.json"), "w") as f:
        json.dump({"sounds": [s[:3] + (os.path.relpath(s[3], root),) for s in snd],
                   "pictures": [p[:3] + (os.path.basename(p[3]),) for p in pics]}, f, indent=0)
    clips = sound_clips(snd, rng)
    build.log(f"evalset: {len(clips)} sound clips x {len(CONDITIONS)} conditions; embedding")
    audio = np.stack([build.embed_audio(degraded, cony, audio_cnn, work, f"eval-{cond}")
                      for cond, degraded in conditions_of(clips, rng)])
    shots = camera_shots(pics, rng)
    build.log(f"evalset: {len(shots)} camera shots; embedding")
    video = build.embed_video(shots, video_cnn, work, "eval", precision)
    np.savez(dst, audio=audio, audio_cls=np.array([c for c, _, _ in clips]),
             audio_group=np.array([g for _, g, _ in clips]), video=video,
             video_cls=np.array([c for c, _, _ in shots]),
             video_group=np.array([g for _, g, _ in shots]))
    build.log(f"evalset: wrote {dst}")


def scenes(data, count, length, seed):
    """count streams of `length` steps of random scenes: [(labels, [(cls, L, clip, t0,
    matched shots [(shot, t0, k)], unrelated shots)])], one draw for every cell."""
    rng = np.random.default_rng(seed)
    acls = [np.nonzero(data["audio_cls"] == c)[0] for c in sources.CLASSES]
    vcls = [np.nonzero(data["video_cls"] == c)[0] for c in sources.CLASSES]
    steps_a, steps_v = data["audio"].shape[2], data["video"].shape[1]

    def shots(c, L):
        out, need = [], L
        while need:
            k = min(need, steps_v)
            out.append((int(rng.choice(vcls[c])), int(rng.integers(0, steps_v - k + 1)), k))
            need -= k
        return out

    streams = []
    for _ in range(count):
        plan, total = [], 0
        while total < length:
            c = int(rng.integers(len(sources.CLASSES)))
            # at most a clip's tokens: a continual cache has 18 steps a clip (rule 20's
            # val cells); the grid's window tokens have more, so its draws are unchanged
            L = min(int(rng.integers(SCENE[0], SCENE[1] + 1)), steps_a)
            other = (c + 1 + int(rng.integers(len(sources.CLASSES) - 1))) % len(sources.CLASSES)
            clip = int(rng.choice(acls[c]))
            t0 = int(rng.integers(0, steps_a - L + 1))
            plan.append((c, L, clip, t0, shots(c, L), shots(other, L)))
            total += L
        streams.append((total - length, plan))
    return streams


def stream_sound(plan, clips):
    """The waveform of one stream's plan: each scene's clip from its first step's time
    (a window token's start, 1 / STEP_HZ s a step) for its L steps."""
    step = media.RATE // media.STEP_HZ
    return np.concatenate([clips[clip][2][t0 * step:(t0 + L) * step]
                           for _, L, clip, t0, _, _ in plan])


def stream_token_index(steps, tokens):
    """The continual token conyfuse joins at each of a stream's @steps, of the @tokens
    `cony embed --mode continual` gave for its sound: the newest whose PTS (its window's
    first frame, CONTINUAL_HOP frames apart) is at or before the step's time. The last
    96-frame window starts at most 96 frames before the end, so the last steps join the
    newest token there is, as at EOS; more tokens missing than that is an error."""
    per_step = media.RATE // media.STEP_HZ // build.FRAME_SAMPLES
    j = np.arange(steps) * per_step // build.CONTINUAL_HOP
    if j[-1] - (tokens - 1) > 96 // build.CONTINUAL_HOP + 1:
        raise RuntimeError(f"{tokens} continual tokens for {steps} steps, expected about "
                           f"{j[-1] + 1}")
    return np.minimum(j, tokens - 1)


def continual_stream_tokens(root, data, streams, cony, audio_cnn, work, seed=54):
    """{cond: [(steps, 1024) per stream]}: the continual YAMNet token conyfuse joins at
    each step of each stream (the newest whose PTS is at or before the step, as
    build.continual_steps), from each whole stream's sound through `cony embed --mode
    continual`, so a token reads the neighbouring scenes as it would live. The clips are
    remade as build_set made them (the same seeded draws; checked against its groups)."""
    rng = np.random.default_rng(seed)
    snd = sounds(root)
    clips = sound_clips(snd, rng)
    if [g for _, g, _ in clips] != list(data["audio_group"]):
        raise RuntimeError(f"{root}: the remade clips are not evalset.npz's")
    hop = build.CONTINUAL_HOP
    out = {}
    with tempfile.TemporaryDirectory(dir=work, prefix="continual-") as tmp:
        for cond, degraded in conditions_of(clips, rng):
            lines = []
            for k, (_, plan) in enumerate(streams):
                wav, npy = (os.path.join(tmp, f"{cond}-{k}.{e}") for e in ("wav", "npy"))
                media.write_wav(wav, stream_sound(plan, degraded))
                lines.append(f"{wav}\t{npy}\n")
            listing = os.path.join(tmp, "list.txt")
            with open(listing, "w") as f:
                f.writelines(lines)
            subprocess.run([cony, "embed", "-m", audio_cnn, "-e", "--mode", "continual",
                            "--stride", str(hop), "--list", listing], check=True,
                           stdout=subprocess.DEVNULL)
            out[cond] = []
            for k, (_, plan) in enumerate(streams):
                emb = np.load(os.path.join(tmp, f"{cond}-{k}.npy"))
                j = stream_token_index(sum(L for _, L, _, _, _, _ in plan), len(emb))
                out[cond].append(emb[j].astype(np.float32))
            build.log(f"evalset: continual tokens of {len(streams)} streams, {cond}")
    return out


def tokens(data, streams, cond, picture, conditions=CONDITIONS):
    """[(tokens {audio, video}, labels)] of the streams in one cell (the picture "absent"
    gives the matched shots, flagged absent by the caller); data["audio"]'s first axis
    is @conditions. With data["stream_audio"] (continual_stream_tokens), each stream's
    audio tokens are those of its whole sound instead of the clips' window tokens."""
    ci = conditions.index(cond)
    per_stream = data.get("stream_audio", {}).get(cond)
    out = []
    for n, (cut, plan) in enumerate(streams):
        a, v, lab = [] if per_stream is None else [per_stream[n]], [], []
        for c, L, clip, t0, matched, unrelated in plan:
            if per_stream is None:
                a.append(data["audio"][ci, clip, t0:t0 + L])
            for s, s0, k in (unrelated if picture == "unrelated" else matched):
                v.append(data["video"][s, s0:s0 + k])
            lab.append(np.full(L, c))
        out.append(({"audio": np.concatenate(a)[cut:].astype(np.float32),
                     "video": np.concatenate(v)[cut:].astype(np.float32)},
                    np.concatenate(lab)[cut:]))
    return out


def grid(models, data, cpath, count, length, seed, log, continual=None):
    """{"fused": {cond: {picture: {"all": acc, class: acc}}}, "audio": {cond: {...}}}:
    the fused model in every cell (C path), the audio model once a condition.
    @continual: a function of the streams giving continual_stream_tokens' dict, for
    models whose audio input is continual YAMNet."""
    streams = scenes(data, count, length, seed)
    if continual:
        data = dict(data, stream_audio=continual(streams))
    out = {"steps": count * length, "fused": {}, "audio": {}}
    for cond in CONDITIONS:
        out["fused"][cond] = {}
        for pic in PICTURES:
            st = tokens(data, streams, cond, pic)
            senses = ("audio",) if pic == "absent" else ("audio", "video")
            acc, per = scores(cpath.tops(models["fused"], st, senses), st)
            out["fused"][cond][pic] = {"all": acc, **per}
        if "audio" in models:
            st = tokens(data, streams, cond, "absent")
            acc, per = scores(cpath.tops(models["audio"], st, ("audio",)), st)
            out["audio"][cond] = {"all": acc, **per}
        log(f"grid {cond}: fused " + ", ".join(
            f"{p} {out['fused'][cond][p]['all']:.3f}" for p in PICTURES) +
            (f"; audio {out['audio'][cond]['all']:.3f}" if "audio" in models else ""))
    return out


def markdown(cells):
    """The grid of one seed (grid()'s dict) as markdown tables: overall accuracy per cell,
    then per class for clean and 0 dB SNR sound."""
    pct = lambda v: f"{100 * v:.1f}"
    rows = ["| sound | fused, matched | fused, unrelated | fused, camera absent | audio model |",
            "|---|---|---|---|---|"]
    for cond in CONDITIONS:
        f = cells["fused"][cond]
        rows.append(f"| {cond} | " + " | ".join(pct(f[p]["all"]) for p in PICTURES) +
                    f" | {pct(cells['audio'][cond]['all'])} |")
    for cond in ("clean", "snr0"):
        rows += ["", f"Per class, {cond}:", "",
                 "| | " + " | ".join(sources.CLASSES) + " |",
                 "|---|" + "---|" * len(sources.CLASSES)]
        for name, cell in [(f"fused, {p}", cells["fused"][cond][p]) for p in PICTURES] + [
                ("audio model", cells["audio"][cond])]:
            rows.append(f"| {name} | " + " | ".join(pct(cell[c]) for c in sources.CLASSES) + " |")
    return "\n".join(rows)


def goals(cells):
    """Rule 11's margins in points: {"U": min over classes, "M", "D", "A"}."""
    f, a = cells["fused"], cells["audio"]
    return {"U": min(100 * (f["clean"]["unrelated"][c] - a["clean"][c]) for c in sources.CLASSES),
            "M": 100 * (f["clean"]["matched"]["all"] - a["clean"]["all"]),
            "D": 100 * (f["snr0"]["matched"]["all"] - a["snr0"]["all"]),
            "A": 100 * (f["clean"]["absent"]["all"] - a["clean"]["all"])}


def mean(grids):
    """The cell-wise mean of several seeds' grids (same shape)."""
    if isinstance(grids[0], dict):
        return {k: mean([g[k] for g in grids]) for k in grids[0]}
    return float(np.mean(grids))


NEED = {"U": -0.5, "M": 1.0, "D": 5.0, "A": -0.5}


if __name__ == "__main__":
    import sys
    for path in sys.argv[1:]:
        with open(path) as fh:
            seeds = json.load(fh)
        if len(seeds) > 1:
            seeds["mean"] = mean(list(seeds.values()))
        for seed, cells in seeds.items():
            print(f"## {path}, seed {seed}\n\n{markdown(cells)}\n")
            print("Rule 11: " + ", ".join(f"{k} {v:+.2f} ({'met' if v >= NEED[k] else 'missed'})"
                                          for k, v in goals(cells).items()) + "\n")
