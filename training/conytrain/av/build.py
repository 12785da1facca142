"""Token caches of the fused model's data: per split, the YAMNet embeddings of every sound
clip and the MobileNet-v2 embeddings of every camera shot, at the fused step rate.

    WORK/tokens-<split>.npz: audio (clips, AUDIO_STEPS, 1024), audio_cls, audio_group,
                             video (shots, SHOT_STEPS, 1280), video_cls, video_group

Audio: the clips of a split are joined into one WAV and embedded by `cony embed -e` (the
C path of conymel preset=yamnet ! conyvggish output=embedding); a clip is CLIP_S s =
32 token strides, of which the first AUDIO_STEPS windows lie wholly inside it. Video: the
shots' frames of a split through filesrc ! rawvideoparse ! conyframeembed
output=embedding, as the element chain computes them.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

from conytrain.av import media, sources
from conytrain.video import camera

AUDIO_STEPS = 29                   # 0.96 s windows every 0.25 s wholly inside an 8 s clip
STRIDES_PER_CLIP = int(media.CLIP_S * media.STEP_HZ)
# Shots per class and split: shared out over the class's photographs (at least 2 each).
# Runs 1 to 4: train 40, test 16 and no val split; rule 5: train 64 (more photographs).
SHOTS = {"train": 64, "val": 16, "test": 16}
SPEECH_UTTERANCES = 40             # utterances decoded per language
SPEECH_CLIPS = {"train": 12, "val": 10, "test": 10}
QUIET_SYNTH = {"train": 30, "val": 10, "test": 10}
# Splits in rng order: train and test keep runs 1 to 4's streams of random numbers.
SPLITS = ("train", "test", "val")
T0 = time.time()


def log(msg):
    print(f"train_av: [{time.time() - T0:.0f} s] {msg}", file=sys.stderr, flush=True)


def recording_clips(it, rng):
    """[(cls, group, clip)] of one recording (media.clips_of), each at a level of its
    class; a noise recording's each followed by the same far away: a quiet room."""
    out = []
    for c in media.clips_of(it, media.decode(it["path"]), rng):
        out.append((it["cls"], it["group"], media.set_level(c, it["cls"], rng)))
        if it["cls"] == "noise":
            out.append(("quiet", it["group"], media.set_level(c, "quiet", rng)))
    return out


def sound_clips(items, split, rng):
    """[(cls, group, clip)] of one split: every recording's clips, speech by language,
    quiet from the noise recordings and synthesised floors; each at a level of its class."""
    out = []
    by_lang = {}
    for it in items:
        if it["split"] != split or it["kind"] not in ("sound", "speech") or it["sound_set"] > 1:
            continue
        if it["kind"] == "speech":
            by_lang.setdefault(it["group"], []).append(it)
            continue
        out += recording_clips(it, rng)
    for lang in sorted(by_lang):
        files = by_lang[lang]
        pick = rng.choice(len(files), size=min(SPEECH_UTTERANCES, len(files)), replace=False)
        utts = [u for u in (media.trim(media.decode(files[i]["path"])) for i in sorted(pick))
                if len(u) > media.RATE // 5]
        if len(utts) < 3:
            continue
        for c in media.speech_clips(utts, SPEECH_CLIPS[split], rng):
            out.append(("talking", lang, media.set_level(c, "talking", rng)))
    for i in range(QUIET_SYNTH[split]):
        out.append(("quiet", f"synth:{split}:{i}",
                    media.set_level(media.synth_floor(rng), "quiet", rng)))
    return out


# The random stream of a split's added recordings (sound set 2, rule 22): its own, so
# that set 1's clips and the shots drawn after them stay as they were.
ADDED_STREAM = 22


def added_clips(items, split, rng):
    """[(cls, group, clip)] of a split's added recordings (item sound_set > 1)."""
    return [c for it in items if it["split"] == split and it["sound_set"] > 1
            for c in recording_clips(it, rng)]


def split_clips(items, split, seed):
    """(clips, rng): a split's sound clips, set 1's then the added ones, and the split's
    random stream after set 1's draws (build's shots are drawn from it)."""
    k = SPLITS.index(split)
    rng = np.random.default_rng([seed, k])
    clips = sound_clips(items, split, rng)
    added = added_clips(items, split, np.random.default_rng([seed, k, ADDED_STREAM]))
    return clips + added, rng


def embed_audio(clips, cony, cnn, work, split):
    wav = os.path.join(work, f"audio-{split}.wav")
    media.write_wav(wav, np.concatenate([c for _, _, c in clips]))
    npy = os.path.join(work, f"audio-{split}.emb.npy")
    subprocess.run([cony, "embed", "-m", cnn, "-e", "-o", npy, wav], check=True,
                   stdout=subprocess.DEVNULL)
    emb = np.load(npy)
    idx = np.arange(len(clips))[:, None] * STRIDES_PER_CLIP + np.arange(AUDIO_STEPS)
    if idx.max() >= len(emb):
        raise RuntimeError(f"{npy}: {len(emb)} windows, expected at least {idx.max() + 1}")
    os.remove(wav)
    return emb[idx].astype(np.float32)


# Continual tokens (models/av/EXPERIMENTS.md, rule 14): `cony embed --mode continual`
# gives one every CONTINUAL_HOP mel frames (10 ms each), PTS = its window's first frame;
# token j reads frames hop·j − RECEPTIVE[0] to hop·j + RECEPTIVE[1] − 1
# (docs/continual-cnn.md: 126 before the 96-frame window, 157 after it), and a frame
# reads MEL_SAMPLES from its start.
CONTINUAL_HOP = 32
FRAME_SAMPLES, MEL_SAMPLES = media.RATE // 100, 400
RECEPTIVE = (126, 96 + 157)


def continual_interior(clip_samples=int(media.CLIP_S * media.RATE)):
    """(first, last): a clip's continual tokens whose receptive field lies wholly inside it
    (so none reads a neighbouring clip of the joined WAV), clip-relative."""
    first = -(-RECEPTIVE[0] // CONTINUAL_HOP)
    last = ((clip_samples - MEL_SAMPLES) // FRAME_SAMPLES - RECEPTIVE[1] + 1) // CONTINUAL_HOP
    return first, last


def continual_steps(clip_samples=int(media.CLIP_S * media.RATE)):
    """(steps, tokens): the clip-relative fused steps whose token is interior, and the
    clip-relative token conyfuse joins at each: the newest whose PTS is at or before the
    step's time, ⌊i·step / hop⌋ in frames. A clip must hold whole steps and whole tokens,
    so every clip of the joined WAV (and of a stream of them) has the same phase."""
    frames = clip_samples // FRAME_SAMPLES
    step = 100 // media.STEP_HZ
    if clip_samples % FRAME_SAMPLES or frames % step or frames % CONTINUAL_HOP:
        raise ValueError(f"a clip of {clip_samples} samples is not whole steps and tokens")
    first, last = continual_interior(clip_samples)
    i = np.arange(frames // step)
    j = i * step // CONTINUAL_HOP
    keep = (j >= first) & (j <= last)
    return i[keep], j[keep]


def embed_audio_continual(clips, cony, cnn, work, split):
    """(clips, steps, 1024): each clip's continual tokens at the fused step rate
    (continual_steps), from one joined WAV through `cony embed -e --mode continual`."""
    wav = os.path.join(work, f"audio-{split}.wav")
    media.write_wav(wav, np.concatenate([c for _, _, c in clips]))
    npy = os.path.join(work, f"audio-{split}.continual.npy")
    subprocess.run([cony, "embed", "-m", cnn, "-e", "--mode", "continual", "--stride",
                    str(CONTINUAL_HOP), "-o", npy, wav], check=True, stdout=subprocess.DEVNULL)
    emb = np.load(npy)
    os.remove(wav)
    per_clip = len(clips[0][2]) // FRAME_SAMPLES // CONTINUAL_HOP
    idx = np.arange(len(clips))[:, None] * per_clip + continual_steps(len(clips[0][2]))[1]
    if idx.max() >= len(emb):
        raise RuntimeError(f"{npy}: {len(emb)} tokens, expected at least {idx.max() + 1}")
    return emb[idx].astype(np.float32)


def continual_split(root, work, window_work, cony, audio_cnn, seed, split, sound_set=1):
    """WORK/tokens-<split>.npz with continual audio tokens (rule 14): the split's clips
    (of @sound_set), remade as build() made them (the same seeded draws), through
    embed_audio_continual; the video tokens and every label those of
    WINDOW_WORK/tokens-<split>.npz."""
    dst = os.path.join(work, f"tokens-{split}.npz")
    if os.path.exists(dst):
        return
    os.makedirs(work, exist_ok=True)
    items = sources.collect(root, sound_set=sound_set)
    clips, _ = split_clips(items, split, seed)
    ref = np.load(os.path.join(window_work, f"tokens-{split}.npz"))
    if list(ref["audio_group"]) != [g for _, g, _ in clips]:
        raise RuntimeError(f"{window_work}: the remade {split} clips are not tokens-{split}.npz's")
    log(f"{split}: {len(clips)} sound clips; continual tokens")
    audio = embed_audio_continual(clips, cony, audio_cnn, work, split)
    np.savez(dst, audio=audio, **{k: ref[k] for k in ref.files if k != "audio"})
    log(f"{split}: wrote {dst} ({audio.shape[1]} steps a clip)")


def photo_shots(items, split, rng, every=False):
    """[(cls, group, frames)] of one split: SHOTS[split] shots per class over its
    photographs, round robin from a seeded order; @every (photo set 2): at least one
    shot of each photograph."""
    quiet = [media.load_picture(it["path"], it["kind"]) for it in items
             if it["split"] == split and it["cls"] == "quiet"]
    out = []
    for cls in sources.CLASSES:
        pics = [it for it in items if it["split"] == split and it["cls"] == cls
                and it["kind"] in ("photo", "cutout")]
        n = max(SHOTS[split], 2 * len(pics)) if len(pics) <= SHOTS[split] // 2 else SHOTS[split]
        n = max(n, len(pics)) if every else n
        order = rng.permutation(len(pics))
        loaded = {}
        for k in range(n):
            it = pics[order[k % len(pics)]]
            if it["path"] not in loaded:
                loaded[it["path"]] = media.load_picture(it["path"], it["kind"])
            out.append((cls, it["group"], media.shot(loaded[it["path"]], it["kind"], quiet, rng)))
    return out


def embed_video(shots, cnn, work, split, precision="auto"):
    raw = os.path.join(work, f"video-{split}.rgb")
    with open(raw, "wb") as f:
        for _, _, frames in shots:
            f.write(frames.tobytes())
    out = os.path.join(work, f"video-{split}.f32")
    size = camera.SIZE
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={raw}",
                    f"blocksize={size * size * 3}", "!", "rawvideoparse",
                    f"width={size}", f"height={size}", "format=rgb",
                    f"framerate={media.STEP_HZ}/1", "!", "conyframeembed", f"model={cnn}",
                    # runs 1 to 4: float (run 1's recipe); rule 5: auto (what ships)
                    f"precision={precision}", "output=embedding", "!", "filesink", f"location={out}"], check=True)
    emb = np.fromfile(out, np.float32).reshape(len(shots), media.SHOT_STEPS, -1)
    os.remove(raw)
    os.remove(out)
    return emb


def build(root, work, cony, audio_cnn, video_cnn, seed, precision="auto", splits=SPLITS,
          photo_set=1, sound_set=1):
    """Writes WORK/tokens-<split>.npz of @splits (each skipped when there) and
    WORK/manifest.json, from the sources of @photo_set and @sound_set (sources.collect:
    set 1's sound clips and shots are the same in every set)."""
    os.makedirs(work, exist_ok=True)
    items = sources.collect(root, photo_set, sound_set)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump([{k: v for k, v in it.items() if k != "path"} for it in items], f, indent=0)
    for split in SPLITS:
        dst = os.path.join(work, f"tokens-{split}.npz")
        if split not in splits or os.path.exists(dst):
            continue
        clips, rng = split_clips(items, split, seed)
        log(f"{split}: {len(clips)} sound clips; embedding")
        audio = embed_audio(clips, cony, audio_cnn, work, split)
        shots = photo_shots(items, split, rng, every=photo_set > 1)
        log(f"{split}: {len(shots)} camera shots; embedding")
        video = embed_video(shots, video_cnn, work, split, precision)
        np.savez(dst, audio=audio, audio_cls=np.array([c for c, _, _ in clips]),
                 audio_group=np.array([g for _, g, _ in clips]), video=video,
                 video_cls=np.array([c for c, _, _ in shots]),
                 video_group=np.array([g for _, g, _ in shots]))
        log(f"{split}: wrote {dst}")


DEGRADED_COPIES = 2                # degraded copies of each train clip (rule 11)
# The degradations' random streams: train's is rule 11's; val's (rule 12) its own.
DEGRADE_STREAM = {"train": 11, "val": 12}


def noise(n, kind, rng):
    """Unit-RMS white, pink or brown Gaussian noise of n samples."""
    x = rng.standard_normal(n)
    if kind != "white":
        f = np.fft.rfftfreq(n, 1 / media.RATE)
        x = np.fft.irfft(np.fft.rfft(x) / np.maximum(f, 20.0) ** (0.5 if kind == "pink" else 1.0), n)
    return (x / np.sqrt(np.mean(x ** 2))).astype(np.float32)


def degrade_random(x, rng):
    """x degraded at random (rule 11): white, pink or brown noise at 20, 10, 0 or -5 dB
    SNR, 15 to 35 dB quieter, or clipped at +-0.5 after +12 to +30 dB."""
    kind = int(rng.integers(6))
    if kind < 4:
        snr = (20, 10, 0, -5)[kind]
        y = x + noise(len(x), rng.choice(["white", "pink", "brown"]), rng) * 10 ** (
            (media.rms_db(x) - snr) / 20)
    elif kind == 4:
        y = x * 10 ** (-rng.uniform(15, 35) / 20)
    else:
        y = np.clip(x * 10 ** (rng.uniform(12, 30) / 20), -0.5, 0.5)
    return np.clip(y, -1, 1).astype(np.float32)


def degrade_split(root, work, cony, audio_cnn, seed, split="train", mode="window",
                  sound_set=1):
    """WORK/tokens-<split>-degraded.npz: audio (DEGRADED_COPIES, clips, steps, 1024),
    the split's clips (remade as build() made them: the same seeded draws) each degraded
    DEGRADED_COPIES times (the same draws whatever the mode), embedded as WORK's clean
    tokens were: per window, or continual (@mode, rule 16: embed_audio_continual);
    audio_cls and audio_group as tokens-<split>.npz's."""
    dst = os.path.join(work, f"tokens-{split}-degraded.npz")
    if os.path.exists(dst):
        return
    clips, _ = split_clips(sources.collect(root, sound_set=sound_set), split, seed)
    ref = np.load(os.path.join(work, f"tokens-{split}.npz"))
    if list(ref["audio_group"]) != [g for _, g, _ in clips]:
        raise RuntimeError(f"{work}: the remade {split} clips are not tokens-{split}.npz's")
    rng = np.random.default_rng([seed, DEGRADE_STREAM[split]])
    log(f"{split}: {len(clips)} sound clips, {DEGRADED_COPIES} degraded copies; embedding")
    embed = embed_audio_continual if mode == "continual" else embed_audio
    audio = np.stack([embed([(c, g, degrade_random(x, rng)) for c, g, x in clips],
                            cony, audio_cnn, work, f"{split}-degraded{k}")
                      for k in range(DEGRADED_COPIES)])
    if audio.shape[1:] != ref["audio"].shape:
        raise RuntimeError(f"{work}: degraded tokens {audio.shape[1:]} are not the clean "
                           f"ones' {ref['audio'].shape} (--audio-mode as the work's)")
    np.savez(dst, audio=audio, audio_cls=ref["audio_cls"], audio_group=ref["audio_group"])
    log(f"{split}: wrote {dst}")
