"""The audio data set versions from 9 on (training/data/README.md) as build.py's --data-version
selects them: version 9's arguments and the tables of recordings added after it (versions/
*.tsv). Plain Python (no numpy), so that build_audio_dataset.sh can list a version's packages
before it has installed anything:

    python3 -m conytrain.data.data_versions --packages [build.py ARGS]

prints the packages of the added tables that ARGS' --data-version holds, one a line."""

import argparse
import csv
import os

# The data set versions' tables (versions/*.tsv): tab-separated, a header line, '#' lines are
# comments.
VERSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "versions")

# Tables of real recordings added for training only, each with families of its own (set=extra,
# train_only_<class><version>), planned after every other clip with an RNG stream and a seed
# tag of their own, so that the clips planned before them, and so the validation and test
# splits, do not change. table -> (file, RNG stream and seed tag). 11: music of four packages
# (added_music.tsv); 12: noise and music of fourteen more (added_v12.tsv); 13: every class of
# twenty-eight more, for validation only (val_v13.tsv); 14: animal calls of four more, mined
# with YAMNet's AudioSet scores (added_v14.tsv); 15: alarm tones of two more, mined the same
# way (added_v15.tsv).
ADDED = {11: ("added_music.tsv", 6), 12: ("added_v12.tsv", 8), 13: ("val_v13.tsv", 9),
         14: ("added_v14.tsv", 10), 15: ("added_v15.tsv", 11)}

# What every version from 9 on is built with (and build.py's defaults without --data-version)
VERSION_9_ARGS = {"per_class": 400, "train_extra": 800, "alarm_synth": "v3",
                  "train_only_version": 7}
DEFAULT_ARGS = {"per_class": 120, "train_extra": 0, "alarm_synth": "v2", "train_only_version": 3}

# data set version -> the added tables it holds (ADDED's key -> clips per class). Versions 12
# and 13 build on 11, versions 14 and 15 on 9; version 10 (--without-v6-list) and those
# before 9 are given by their arguments (README).
DATA_VERSIONS = {9: {}, 11: {11: {"music": 400}}, 14: {14: {"animal": 100}}}
DATA_VERSIONS[12] = {**DATA_VERSIONS[11], 12: {"noise": 450, "music": 300}}
DATA_VERSIONS[13] = {**DATA_VERSIONS[12],
                     13: {"speech": 48, "music": 111, "noise": 64, "alarm": 72, "animal": 48}}
DATA_VERSIONS[15] = {**DATA_VERSIONS[14], 15: {"alarm": 100}}


def read_table(name):
    """The rows of versions/NAME as dicts."""
    with open(os.path.join(VERSIONS, name), newline="") as f:
        return list(csv.DictReader((line for line in f if not line.startswith("#")),
                                   delimiter="\t", quoting=csv.QUOTE_NONE))


def added_tables(version):
    """[(table, clips per class)] that data set @version holds, in table order (None: no
    --data-version, no added table)."""
    return sorted(DATA_VERSIONS[version].items()) if version is not None else []


def added_packages(version):
    """The Debian packages of data set @version's added tables, sorted."""
    return sorted({r["package"] for table, _ in added_tables(version)
                   for r in read_table(ADDED[table][0])})


def add_argument(ap):
    """build.py's --data-version option, on the parser @ap."""
    ap.add_argument("--data-version", type=int, choices=sorted(DATA_VERSIONS),
                    help="build data set version N (9, 11-15; README): version 9's arguments "
                         "(--per-class 400 --train-extra 800 --alarm-synth v3 "
                         "--train-only-version 7, each of which may still be given) and the "
                         "tables of recordings added after it that N holds: 11 = 9 + 400 music "
                         "clips (added_music.tsv); 12 = 11 + 450 noise and 300 music "
                         "(added_v12.tsv); 13 = 12 + validation-only clips (val_v13.tsv, split "
                         "valx); 14 = 9 + 100 mined animal calls (added_v14.tsv); 15 = 14 + 100 "
                         "mined alarm tones (added_v15.tsv); added clips are set=extra, the "
                         "other clips stay the same")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--packages", action="store_true", required=True,
                    help="print the packages of --data-version's added tables, one a line")
    add_argument(ap)
    a, _ = ap.parse_known_args(argv)    # the other arguments are build.py's
    for p in added_packages(a.data_version):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
