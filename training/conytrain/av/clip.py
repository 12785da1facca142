"""The fused model's test clip, tests/golden/av/scenes.webm: five scenes of SCENE_S seconds,
one per class, each a still photograph (320x240, 10 fps, VP8) with a sound of its kind
(16 kHz mono, Vorbis), all from the test split (sources.py) and all shippable
(tests/golden/av/NOTICE), and the golden files of the shipped model on it:

    fused.npy   (GOLDEN_STEPS, d_in) float32: conyfuse's fused tokens of the clip's first
                steps (decodebin ! ... ! conyfuse ! filesink, pipelines/av_lib.sh's chains)
    logits.npy  (GOLDEN_STEPS, classes) float64: the PyTorch twin's stream logits of
                models/av/av.safetensors on fused.npy
    scenes.json the scenes: start, end (s), expected label

tests/models/test_av_model.sh checks `cony classify` = logits.npy and that av_file.sh labels each
scene as expected.
"""

import json
import os
import subprocess
import tempfile

import numpy as np

from conytrain.av import media, sources

SCENE_S = 5.0
W, H, FPS = 320, 240, 10
GOLDEN_STEPS = 24
TUX = f"{sources.TUX}"
# (label, picture, kind, sound(s), level dBFS): each group is a test group of sources.py.
SCENES = [
    ("talking", f"{sources.SK}/astronaut.png", "photo", f"{TUX}/**/*_desc_da.ogg", -20),
    ("music", f"{TUX}/hobbies/music/string/violin.png", "cutout",
     f"{sources.GAMES}/frozen-bubble/snd/frozen-mainzik-1p.ogg", -18),
    ("animal", f"{TUX}/animals/mammals/dogs/dog.png", "cutout",
     f"{TUX}/animals/mammals/dogs/dog.ogg", -20),
    # (the first choice, toilet.png with toilet.ogg, is labelled animal: MODEL.md)
    ("noise", f"{TUX}/vehicles/construction/dumper.png", "cutout",
     f"{sources.GAMES}/lincity-ng/sounds/OreMine1.wav", -22),
    ("quiet", f"{sources.SK}/grass.png", "photo", None, -75),
]


def scene_audio(root, pattern, level, rng):
    n = int(SCENE_S * media.RATE)
    if pattern is None:                                   # a quiet room (synthesised)
        x = media.synth_floor(rng)
        x = np.resize(x, n)
    else:
        import glob
        files = sorted(glob.glob(os.path.join(root, pattern), recursive=True))
        if "_desc_" in pattern:                           # utterances of one language
            pick = rng.choice(len(files), size=8, replace=False)
            parts = [media.trim(media.decode(files[i])) for i in sorted(pick)]
            x = media.repeat_gaps([p for p in parts if len(p)], n, rng, gap=(0.08, 0.35))
        else:
            x = media.decode(files[0])
            x = media.loop_crossfade(media.trim(x), n, rng) if "loop_" in pattern or \
                "sounds/" in pattern else media.repeat_gaps([media.trim(x)], n, rng)
    x = x[:n] * 10 ** ((level - media.rms_db(x[:n])) / 20)
    return np.clip(x, -0.98, 0.98).astype(np.float32)


def scene_picture(root, path, kind, rng):
    from PIL import Image
    pic = media.load_picture(os.path.join(root, path), kind)
    if kind == "cutout":
        back = np.full((media.PHOTO_H, media.PHOTO_W, 3), 150.0, np.float32)
        pic = media.composite(pic, back, np.random.default_rng(1))
    im = Image.fromarray(np.clip(pic, 0, 255).astype(np.uint8)).resize((W, H), Image.BILINEAR)
    return np.asarray(im)


def make_clip(root, out, seed=41):
    """Writes OUT (WebM) and returns the scenes [{label, start, end}]."""
    rng = np.random.default_rng(seed)
    audio, frames, scenes = [], [], []
    for k, (label, pic, kind, snd, level) in enumerate(SCENES):
        audio.append(scene_audio(root, snd, level, rng))
        frames.append(np.repeat(scene_picture(root, pic, kind, rng)[None],
                                int(SCENE_S * FPS), 0))
        scenes.append({"label": label, "start": k * SCENE_S, "end": (k + 1) * SCENE_S})
    with tempfile.TemporaryDirectory() as tmp:
        raw, wav = os.path.join(tmp, "v.rgb"), os.path.join(tmp, "a.wav")
        np.concatenate(frames).tofile(raw)
        media.write_wav(wav, np.concatenate(audio))
        subprocess.run(["gst-launch-1.0", "-q", "webmmux", "name=mux", "!", "filesink",
                        f"location={out}", "filesrc", f"location={raw}",
                        f"blocksize={W * H * 3}", "!", "rawvideoparse", f"width={W}",
                        f"height={H}", "format=rgb", f"framerate={FPS}/1", "!",
                        "videoconvert", "!", "vp8enc", "deadline=1", "target-bitrate=300000",
                        f"keyframe-max-dist={int(SCENE_S * FPS)}", "!", "queue", "!", "mux.",
                        "filesrc", f"location={wav}", "!", "wavparse", "!", "audioconvert",
                        "!", "vorbisenc", "quality=0.3", "!", "queue", "!", "mux."],
                       check=True)
    return scenes


def audio_mode(model):
    """conyvggish's mode properties for the fused model file's audio input, as av_lib.sh
    sets them: "" (window), or "mode=continual stride=N" (N frames from its token rate)."""
    from conytrain.safetensors_io import load as load_st
    inputs = json.loads(load_st(model)[1]["config"])["fusion"]["inputs"]
    (audio,) = [i for i in inputs if i["name"] == "audio"]
    if audio.get("cnn_mode", "window") == "window":
        return ""
    n, d = audio["rate"]
    return f"mode=continual stride={100 * d // n}"


def fused_tokens(clip, model, audio_cnn, video_cnn, steps):
    """conyfuse's first `steps` fused tokens of the clip (the chains of av_lib.sh)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "f.f32")
        tokq = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=30000000000"
        line = (f"filesrc location={clip} ! decodebin name=d conyfuse name=fuse model={model} "
                f"! filesink location={raw} "
                f"d. ! queue ! audioconvert ! audioresample ! conymel preset=yamnet "
                f"! conyvggish model={audio_cnn} output=embedding {audio_mode(model)} "
                f"! {tokq} ! fuse.sink_audio "
                f"d. ! queue ! videoconvert ! videorate ! video/x-raw,framerate=10/1 "
                f"! conyframeembed model={video_cnn} output=embedding ! {tokq} ! fuse.sink_video")
        subprocess.run(["gst-launch-1.0", "-q"] + line.split(), check=True)
        return np.fromfile(raw, np.float32)


def golden(root, outdir, model_path, audio_cnn, video_cnn, log):
    """Writes the clip and its golden files into outdir."""
    import torch
    from conytrain.ref.fusion import FusedClassifier
    from conytrain.safetensors_io import load as load_st
    os.makedirs(outdir, exist_ok=True)
    clip = os.path.join(outdir, "scenes.webm")
    scenes = make_clip(root, clip)
    tensors, meta = load_st(model_path)
    config = json.loads(meta["config"])
    model = FusedClassifier.from_file_parts(tensors, config)
    fused = fused_tokens(clip, model_path, audio_cnn, video_cnn, GOLDEN_STEPS)
    fused = fused.reshape(-1, config["d_in"])[:GOLDEN_STEPS]
    logits = model.double().fused_logits(torch.from_numpy(fused).double())
    np.save(os.path.join(outdir, "fused.npy"), fused)
    np.save(os.path.join(outdir, "logits.npy"), logits.numpy())
    with open(os.path.join(outdir, "scenes.json"), "w") as f:
        json.dump({"scene_s": SCENE_S, "scenes": scenes}, f, indent=1)
    log(f"{outdir}: scenes.webm ({os.path.getsize(clip)} bytes), fused.npy, logits.npy")
