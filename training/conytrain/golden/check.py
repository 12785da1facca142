"""Writing golden files, and checking committed ones against what a generator computes.

A generator describes a golden directory as {relative path: contents}: an array for a
.npy file, ({name: array}, metadata) for a .safetensors file (float16 arrays are
stored as F16, int8 arrays as I8). write() stores that;
compare() checks that a directory holds exactly those files with those values.

The check is numerical, not byte equality: torch and numpy round differently on
different CPUs (AVX2 or AVX-512 kernels, FMA, SIMD exp), so a float64 reference moves
in its last bits from one machine to the next and a float32 result that lies near a
rounding boundary can land on the neighbouring float32.
"""

import glob
import os
import platform
import shutil
import sys

import numpy as np

from conytrain import REPO, safetensors_io

# Allowed max |got - want|, relative to max |want|, by stored dtype.
# float32: float64 results rounded to float32 land one float32 ulp (at most 1.2e-7 of
# max |want|) apart where the float64 value moved across a rounding boundary (seen:
# 9.3e-9 in expsweep_wave.npy, np.exp of an AVX-512 CPU); 1e-6 leaves a margin of 8 and
# catches any edit above that (a stale file is off by far more: another draw by O(1)).
# float64 (the model logits): moved by up to 4.4e-14 between an AVX2 and an AVX-512
# CPU (Nystrom pseudo-inverses amplify the rounding); 1e-10 is far above that.
# Relative to max |want| rather than to max(1, max |want|): the quiet tone's samples are
# 1e-3 in size, and an all-zero file must stay all zero.
RTOL = {np.dtype("<f4"): 1e-6, np.dtype("<f8"): 1e-10}

def find_tool():
    """The built `cony`, to check the C side against a reference: $CONY_TOOL (meson sets
    it), else build/tools/cony of the source tree or the first executable build-*/tools/cony
    built for this machine; None if none."""
    tool = os.environ.get("CONY_TOOL")
    if tool and os.access(tool, os.X_OK):
        return tool
    plain = os.path.join(REPO, "build", "tools", "cony")  # before build-asan/ and the rest
    others = sorted(glob.glob(os.path.join(REPO, "build-*", "tools", "cony")))
    for path in [plain] + others:
        if os.access(path, os.X_OK) and _runs_here(path):
            return path
    return None


def _runs_here(path):
    """False for an ELF file of another machine (build-arm64/'s cony on x86-64)."""
    machines = {"x86_64": 62, "aarch64": 183}  # ELF e_machine values
    with open(path, "rb") as f:
        head = f.read(20)
    want = machines.get(platform.machine())
    if head[:4] != b"\x7fELF" or want is None:
        return True
    return int.from_bytes(head[18:20], "little") == want


def write_main(default_out, golden_files):
    """A generator's main(): writes golden_files(say=print) into the directory given on
    the command line, or default_out."""
    out = sys.argv[1] if len(sys.argv) > 1 else default_out
    os.makedirs(out, exist_ok=True)
    write(out, golden_files(say=print))


def write(directory, files):
    for rel, contents in files.items():
        path = os.path.join(directory, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if rel.endswith(".safetensors"):
            tensors, metadata = contents
            # float16 arrays are stored as F16, as safetensors_io.load returns them
            stored = {np.dtype(np.float16): "F16", np.dtype(np.int8): "I8",
                      np.dtype(np.uint8): "U8", np.dtype(np.int64): "I64"}
            dtypes = {k: stored[np.asarray(v).dtype] for k, v in tensors.items()
                      if np.asarray(v).dtype in stored}
            safetensors_io.save(path, tensors, metadata, dtypes=dtypes)
        else:
            np.save(path, contents)


def committed(directory, rel, default):
    """The contents of a committed file, or `default` where it is missing (compare()
    then reports it)."""
    path = os.path.join(directory, rel)
    if not os.path.isfile(path):
        return default
    return safetensors_io.load(path) if rel.endswith(".safetensors") else np.load(path)


def compare(directory, files):
    """Messages for every way the files under `directory` differ from `files`: a file
    missing or not written by the generator, metadata, tensor names, dtypes or shapes
    that differ, values further apart than RTOL. [] when they agree."""
    present = set(list_files(directory))
    problems = [f"{rel}: not written by the generator" for rel in sorted(present - set(files))]
    problems += [f"{rel}: missing" for rel in sorted(set(files) - present)]
    for rel in sorted(present & set(files)):
        problems += file_problems(rel, committed(directory, rel, None), files[rel])
    return problems


def edited_copy(directory, rel, into, edit):
    """Copies `directory` to `into` (new) with the contents of file `rel` replaced by
    edit(contents): for tests that compare() catches an edit."""
    shutil.copytree(directory, into)
    write(into, {rel: edit(committed(into, rel, None))})
    return into


def bumped(a, relative=1e-3):
    """A copy of array `a` with its largest |value| made `relative` larger."""
    a = a.copy()
    i = np.unravel_index(np.abs(a).argmax(), a.shape)
    a[i] *= 1 + relative
    return a


def list_files(directory):
    for root, _, names in os.walk(directory):
        for name in names:
            yield os.path.relpath(os.path.join(root, name), directory)


def file_problems(rel, got, want):
    if not rel.endswith(".safetensors"):
        problem = array_problem(rel, got, want)
        return [problem] if problem else []
    (tensors, metadata), (want_tensors, want_metadata) = got, want
    problems = [] if metadata == want_metadata else [
        f"{rel}: metadata {metadata}, expected {want_metadata}"]
    if sorted(tensors) != sorted(want_tensors):
        return problems + [f"{rel}: tensors {sorted(tensors)}, expected {sorted(want_tensors)}"]
    problems += [array_problem(f"{rel}:{name}", tensors[name], want_tensors[name])
                 for name in sorted(tensors)]
    return [p for p in problems if p]


def array_problem(name, got, want):
    """None when `got` has want's dtype and shape and is within RTOL of it."""
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
    if want.size == 0:
        return None
    err = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
    allowed = RTOL.get(want.dtype, 0.0) * float(np.abs(want).max())
    if not err <= allowed:   # NaN fails too
        return f"{name}: differs by up to {err:.3g} (allowed {allowed:.3g})"
    return None
