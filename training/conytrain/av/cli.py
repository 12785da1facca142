"""Builds, trains, evaluates and exports the fused audio-video model (models/av/):
training/train_av.sh runs it (through training/train_av.py) after unpacking the Debian
packages (conytrain/av/).

    /usr/bin/python3 training/train_av.py --root DEBS --work out/av [--stages ...]

Stages: build (token caches of --splits, conytrain/av/build.py), continual (the caches of
--splits with continual audio tokens, from the clips and video tokens of --window-work:
rule 14; train with --audio-mode continual), degrade (the clips of
--degrade-splits degraded, WORK/tokens-SPLIT-degraded.npz, embedded as --audio-mode
says), evalset (issue 54's
evaluation set, conytrain/av/evalset.py, in --eval-work from --eval-root), train (the
fused model and the two single-sense models, seeds --seeds), gate (rule 12: the
--baselines-tag audio models with a confidence gate fitted on val, conytrain/av/gate.py),
eval (the card's table, WORK/eval-TAG.json; --eval-split val or val-degraded:
rule 17's val figures, eval-TAG-SPLIT.json), export (the first seed's fused model to
--models: av.safetensors, labels.txt), golden (the test clip and the shipped file's
goldens, tests/golden/av/: conytrain/av/clip.py; needs GST_PLUGIN_PATH), grid (issue 54's
grid on the evaluation set, WORK/grid-TAG.json; with --grid-model FILE that file instead
of the run's fused models; --grid-path ref: through the PyTorch twin, grid-TAG-ref.json).
"""

import argparse
import json
import os

import numpy as np
import torch

from conytrain import REPO
from conytrain.av import build, clip, evalset, gate, sources
from conytrain.av import train as avtrain
from conytrain.av.readout import PENALTIES, Readout
from conytrain.export import export_model

SENSES = {"fused": ("audio", "video"), "audio": ("audio",), "video": ("video",)}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(REPO, "out", "av-debs", "x"),
                    help="the unpacked Debian packages (conytrain/av/sources.py)")
    ap.add_argument("--work", default=os.path.join(REPO, "out", "av"))
    ap.add_argument("--models", default=os.path.join(REPO, "models", "av"))
    ap.add_argument("--cony", default=os.path.join(REPO, "build", "tools", "cony"))
    ap.add_argument("--audio-cnn", default=os.path.join(REPO, "models", "yamnet", "yamnet.safetensors"))
    ap.add_argument("--video-cnn", default=os.path.join(REPO, "models", "imagenet",
                                                         "mobilenet_v2.safetensors"))
    ap.add_argument("--stages", default="build,train,eval,export")
    ap.add_argument("--data-seed", type=int, default=20261128)
    ap.add_argument("--splits", default="train,test,val",
                    help="the splits the build stage makes (each skipped when there)")
    ap.add_argument("--photo-set", type=int, default=1, choices=sources.PHOTO_SETS,
                    help="the build stage's photographs (sources.py; 2: rule 21's wider set)")
    ap.add_argument("--sound-set", type=int, default=1, choices=sources.SOUND_SETS,
                    help="the build, continual and degrade stages' recordings (sources.py; "
                         "2: rule 22's added music)")
    ap.add_argument("--packages", action="store_true",
                    help="print the Debian packages that --photo-set and --sound-set draw on, "
                         "on one line, and exit (training/train_av.sh fetches them)")
    ap.add_argument("--audio-mode", default="window", choices=["window", "continual"],
                    help="how YAMNet ran for WORK's audio tokens, recorded in the models' "
                         "configs (continual: the continual stage's caches, rule 14)")
    ap.add_argument("--window-work", default=os.path.join(REPO, "out", "av5"),
                    help="the continual stage's window caches (their clips and video tokens)")
    ap.add_argument("--degrade-splits", default="train",
                    help="the splits the degrade stage copies degraded (rule 12: val too)")
    ap.add_argument("--video-precision", default="auto", choices=["auto", "float", "int8"],
                    help="conyframeembed's path for the video tokens (run 1: float)")
    ap.add_argument("--eval-split", default="test", choices=["test", "val", "val-degraded"],
                    help="the split the eval stage measures (WORK/eval-TAG[-val].json)")
    ap.add_argument("--eval-kinds", default="fused,audio,video",
                    help="the models whose rows the eval stage measures")
    ap.add_argument("--seeds", default="1,2,3", help="training seeds; the first is exported")
    ap.add_argument("--tag", default="run1", help="names this run's files in WORK")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--landmarks", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--p-absent", type=float, default=0.15, help="per scene and sense")
    ap.add_argument("--p-contra", type=float, default=0.1, help="per scene")
    ap.add_argument("--contra-senses", default="audio,video",
                    help="the senses that contradict (the label follows the other)")
    ap.add_argument("--truthful-window", action="store_true",
                    help="a sense absent for a whole window leaves the other truthful (no "
                         "contradiction in that window); else DropSampler drops windows")
    ap.add_argument("--baselines-tag", default=None,
                    help="take the single-sense models of that run instead of training them")
    ap.add_argument("--video-readout", type=int, default=0, metavar="K",
                    help="the video as the scores of a linear read-out cross-fitted on K "
                         "folds of photographs (models/av/EXPERIMENTS.md, rule 7); 0: off")
    ap.add_argument("--readout-penalties", type=penalty_list,
                    default=",".join("%g" % p for p in PENALTIES),
                    help="the read-out's L2 penalties, comma-separated; the best out of fold "
                         "is used (default %(default)s)")
    ap.add_argument("--start-from-audio", action="store_true",
                    help="the fused model starts from the same seed's trained audio model "
                         "(models/av/EXPERIMENTS.md, rule 10)")
    ap.add_argument("--kinds", default="fused,audio,video",
                    help="the models the train stage trains (rule 11: audio, then fused)")
    ap.add_argument("--p-degraded", type=float, default=0.0,
                    help="a scene's sound from a degraded copy of its clip (rule 11); 0: off")
    ap.add_argument("--eval-root", default=os.path.join(REPO, "out", "av-eval-debs", "x"),
                    help="the unpacked packages of the evaluation set (evalset.PACKAGES)")
    ap.add_argument("--eval-work", default=os.path.join(REPO, "out", "av-eval"))
    ap.add_argument("--grid-model", default=None,
                    help="the grid stage measures this fused model file (seed: the first)")
    ap.add_argument("--grid-streams", type=int, default=40)
    ap.add_argument("--grid-path", default="c", choices=["c", "ref"],
                    help="the grid through `cony classify` (c) or the PyTorch float64 twin")
    ap.add_argument("--gate-lambdas", default=",".join(str(v) for v in gate.LAMBDAS),
                    help="the gate stage's weights of the clean-unrelated cell, tried in "
                         "turn on val (rule 12; one value: that one)")
    ap.add_argument("--gate-choice", default="guard", choices=["guard", "margin"],
                    help="how the gate stage picks lambda on val (rule 12: guard; rule 13: "
                         "margin)")
    ap.add_argument("--gate-context", default=None, choices=["audio"],
                    help="the gate's fifth feature, a degradation detector on that input "
                         "(rule 13; also keeps the gate's scale positive)")
    ap.add_argument("--p-noisy", type=float, default=0.1, help="per scene and sense")
    ap.add_argument("--p-step", type=float, default=0.05, help="a sense absent at one step")
    ap.add_argument("--p-window", type=float, default=0.15, help="a sense absent for a window")
    ap.add_argument("--test-streams", type=int, default=60)
    ap.add_argument("--test-steps", type=int, default=96)
    ap.add_argument("--test-seed", type=int, default=7)
    return ap.parse_args(argv)


def penalty_list(text):
    """Positive floats from "a,b,c" (argparse type)."""
    try:
        out = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}")
    if not out or min(out) <= 0:
        raise argparse.ArgumentTypeError(f"penalties must be positive: {text!r}")
    return out


def model_path(args, kind, seed):
    tag = args.baselines_tag if kind != "fused" and args.baselines_tag else args.tag
    return os.path.join(args.work, f"{tag}-{kind}-s{seed}.pt")


def stage_order(args):
    """The kinds to train, the fused model last when it starts from the audio model."""
    kinds = sorted(SENSES, key=lambda k: k == "fused") if args.start_from_audio else SENSES
    return [(k, SENSES[k]) for k in kinds]


def stage_train(args, seeds):
    data = avtrain.load(args.work, "train")
    if args.p_degraded > 0:
        data["audio_degraded"] = avtrain.load(args.work, "train-degraded")["audio"]
    needs_video = {"fused", "video"} & set(args.kinds.split(","))
    readout = (Readout(data, args.video_readout, build.log, args.readout_penalties)
               if args.video_readout and needs_video else None)
    for seed in seeds:
        args.train_seed = seed
        for kind, senses in stage_order(args):
            if kind != "fused" and args.baselines_tag or kind not in args.kinds.split(","):
                continue
            path = model_path(args, kind, seed)
            if os.path.exists(path):
                continue
            build.log(f"training {kind} (seed {seed})")
            start = None
            if kind == "fused" and args.start_from_audio:
                start = load_model(model_path(args, "audio", seed))
            model = avtrain.train_one(senses, data, args, build.log, readout, start)
            torch.save({"config": model.config, "state": model.state_dict()}, path)


def load_model(path):
    ck = torch.load(path)
    c = ck["config"]
    fusion = c["fusion"]
    kw = {k: v for k, v in c.items() if k not in ("fusion", "architecture", "d_in")}
    model = avtrain.FusedClassifier(fusion["inputs"], fusion["rate"], fusion.get("gate"), **kw)
    for b, block in enumerate(model.encoder.blocks):
        q = ck["state"].get(f"encoder.blocks.{b}.attn.q_landmarks")
        if q is not None:
            block.attn.set_landmarks(q, ck["state"][f"encoder.blocks.{b}.attn.k_landmarks"])
    model.load_state_dict(ck["state"])
    return model.eval()


def cached_readout(args, data):
    """The train split's read-out (readout.Readout, --readout-penalties), kept in
    WORK/readout-<penalties>.npz (its fits take minutes)."""
    key = "_".join("%g" % p for p in args.readout_penalties)
    path = os.path.join(args.work, f"readout-{key}.npz")
    if os.path.exists(path):
        z = np.load(path)
        r = Readout.__new__(Readout)
        r.a, r.c, r.penalty = z["a"], z["c"], float(z["penalty"])
        build.log(f"video read-out: {path} (penalty {r.penalty:g})")
        return r
    r = Readout(data, args.video_readout or 5, build.log, args.readout_penalties)
    np.savez(path, a=r.a, c=r.c, penalty=r.penalty)
    return r


def stage_gate(args, seeds):
    """Rule 12: each seed's audio model (--baselines-tag) with a confidence gate on the
    video read-out, fitted on val (conytrain/av/gate.py), saved as the run's fused model."""
    readout = cached_readout(args, avtrain.load(args.work, "train"))
    lambdas = [float(v) for v in args.gate_lambdas.split(",")]
    context = gate.detector(args.work, build.log) if args.gate_context else None
    spec = {"input": "video", **({"context": args.gate_context} if args.gate_context else {})}
    for seed in seeds:
        args.train_seed = seed
        path = model_path(args, "fused", seed)
        if os.path.exists(path):
            continue
        audio = load_model(model_path(args, "audio", seed))
        cells = gate.val_cells(audio, readout, args.work, args.test_steps, build.log, context)
        model, lam = gate.gated_model(
            load_model(model_path(args, "audio", seed)),
            lambda: avtrain.make_model(("audio", "video"), args, gate=spec),
            readout, cells, lambdas, build.log, args.gate_choice, context)
        torch.save({"config": model.config, "state": model.state_dict(), "lambda": lam}, path)


def eval_data(work, split):
    """The tokens of an eval split; "val-degraded" (rule 17): val's video and labels, the
    sound from each val clip's degraded copies (WORK/tokens-val-degraded.npz), every copy
    a clip of its own."""
    if split != "val-degraded":
        return avtrain.load(work, split)
    data = avtrain.load(work, "val")
    copies = np.load(os.path.join(work, "tokens-val-degraded.npz"))["audio"]
    if copies.shape[1:] != data["audio"].shape:
        raise SystemExit(f"{work}: tokens-val-degraded.npz {copies.shape[1:]} is not "
                         f"tokens-val.npz's {data['audio'].shape}")
    data["audio"] = copies.reshape(-1, *copies.shape[2:])
    for k in ("audio_cls", "audio_group"):
        data[k] = np.concatenate([data[k]] * len(copies))
    return data


def stage_eval(args, seeds):
    data = eval_data(args.work, args.eval_split)
    streams = avtrain.test_streams(data, args.test_streams, args.test_steps, args.test_seed)
    out = {"steps": args.test_streams * args.test_steps, "seeds": {}}
    for seed in seeds:
        models = {k: load_model(model_path(args, k, seed)) for k in args.eval_kinds.split(",")}
        row = avtrain.evaluate(models, streams, avtrain.CPath(args.cony, args.work))
        out["seeds"][seed] = row
        build.log(f"seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()
                                                 if isinstance(v, float)))
    keys = [k for k, v in out["seeds"][seeds[0]].items() if isinstance(v, float)]
    out["mean"] = {k: float(np.mean([out["seeds"][s][k] for s in seeds])) for k in keys}
    build.log("mean: " + ", ".join(f"{k} {v:.3f}" for k, v in out["mean"].items()))
    suffix = "" if args.eval_split == "test" else f"-{args.eval_split}"
    avtrain.save_json(os.path.join(args.work, f"eval-{args.tag}{suffix}.json"), out)


def stage_grid(args, seeds):
    z = np.load(os.path.join(args.eval_work, "evalset.npz"))
    data = {k: z[k] for k in z.files}
    cpath = (avtrain.CPath(args.cony, args.eval_work) if args.grid_path == "c"
             else avtrain.RefPath())
    name = ("shipped" if args.grid_model else args.tag) + ("-ref" if args.grid_path == "ref" else "")
    path = os.path.join(args.work, f"grid-{name}.json")
    out = {}
    if os.path.exists(path):         # other seeds' grids, measured before
        with open(path) as f:
            out = json.load(f)
    made = {}

    def stream_tokens(streams):   # every seed's grid has the same streams: made once
        if "tokens" not in made:
            made["tokens"] = evalset.continual_stream_tokens(
                args.eval_root, data, streams, args.cony, args.audio_cnn, args.eval_work)
        return made["tokens"]

    for seed in seeds[:1] if args.grid_model else seeds:
        fused = (load_file(args.grid_model) if args.grid_model
                 else load_model(model_path(args, "fused", seed)))
        models = {"fused": fused, "audio": load_model(model_path(args, "audio", seed))}
        continual = None
        if grid_audio_mode(models) == "continual":   # rule 14's models: each stream's tokens
            continual = stream_tokens
        out[str(seed)] = evalset.grid(models, data, cpath, args.grid_streams,
                                      args.test_steps, 54, build.log, continual)
    avtrain.save_json(path, out)


def audio_cnn_mode(model):
    """"window" or "continual": the YAMNet tokens a FusedClassifier's audio input takes."""
    (audio,) = [i for i in model.config["fusion"]["inputs"] if i["name"] == "audio"]
    return audio.get("cnn_mode", "window")


def grid_audio_mode(models):
    """The YAMNet tokens the grid's models take (audio_cnn_mode), which must be the same."""
    modes = {k: audio_cnn_mode(m) for k, m in models.items()}
    if len(set(modes.values())) > 1:
        raise SystemExit("grid: the models take different audio tokens: " +
                         ", ".join(f"{k} {v}" for k, v in modes.items()))
    return modes["fused"]


def load_file(path):
    """The FusedClassifier of an exported model file."""
    from conytrain import safetensors_io
    tensors, meta = safetensors_io.load(path)
    return avtrain.FusedClassifier.from_file_parts(tensors, json.loads(meta["config"]))


def stage_export(args, seed):
    os.makedirs(args.models, exist_ok=True)
    model = load_model(model_path(args, "fused", seed))
    export_model(model, os.path.join(args.models, "av.safetensors"))
    with open(os.path.join(args.models, "labels.txt"), "w") as f:
        f.write("\n".join(sources.CLASSES) + "\n")
    build.log(f"exported {args.models}/av.safetensors")


def main(argv=None):
    args = parse(argv)
    if args.packages:
        print(" ".join(sources.packages(args.photo_set, args.sound_set)))
        return 0
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    stages = args.stages.split(",")
    if "build" in stages:
        build.build(args.root, args.work, args.cony, args.audio_cnn, args.video_cnn,
                    args.data_seed, args.video_precision, args.splits.split(","),
                    args.photo_set, args.sound_set)
    if "continual" in stages:
        for split in args.splits.split(","):
            build.continual_split(args.root, args.work, args.window_work, args.cony,
                                  args.audio_cnn, args.data_seed, split, args.sound_set)
    if "degrade" in stages:
        for split in args.degrade_splits.split(","):
            build.degrade_split(args.root, args.work, args.cony, args.audio_cnn,
                                args.data_seed, split, args.audio_mode, args.sound_set)
    if "evalset" in stages:
        evalset.build_set(args.eval_root, args.eval_work, args.cony, args.audio_cnn,
                          args.video_cnn, precision=args.video_precision)
    if "train" in stages:
        stage_train(args, seeds)
    if "gate" in stages:
        stage_gate(args, seeds)
    if "eval" in stages:
        stage_eval(args, seeds)
    if "grid" in stages:
        stage_grid(args, seeds)
    if "export" in stages:
        stage_export(args, seeds[0])
    if "golden" in stages:
        clip.golden(args.root, os.path.join(REPO, "tests", "golden", "av"),
                    os.path.join(args.models, "av.safetensors"), args.audio_cnn,
                    args.video_cnn, build.log)
    return 0
