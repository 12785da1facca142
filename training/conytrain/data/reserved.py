"""Debian packages reserved for evaluation, which no data set may download, mine or train on.

The house rule (DEVELOPERS.md, "Rules of the house"): a package is reserved when its name's
MD5 (hex) starts with 0, or when it is listed in ../shared/reserved-packages.txt (read when
that file exists beside the checkout; the MD5 half needs nothing). Every script that fetches
data packages checks its list here first, and training/tests/test_reserved_packages.py checks
every package the data sources name.

    python3 -m conytrain.data.reserved NAME...   prints each reserved name; exits 1 if any
"""
import hashlib
import os
import sys

LIST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "..", "..", "..", "..", "shared", "reserved-packages.txt")


def listed(path=LIST_FILE):
    """The names in the shared list (empty when the file is not there)."""
    try:
        with open(path) as f:
            return {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}
    except FileNotFoundError:
        return set()


def md5_reserved(name):
    return hashlib.md5(name.encode()).hexdigest().startswith("0")


def reserved(names, path=LIST_FILE):
    """The reserved names among names, in their order."""
    lst = listed(path)
    return [n for n in names if md5_reserved(n) or n in lst]


def refuse(names, what="data packages"):
    """Raises ValueError naming every reserved package among names."""
    bad = reserved(names)
    if bad:
        raise ValueError("%s include Debian packages reserved for evaluation (name's MD5 starts "
                         "with 0, or listed in shared/reserved-packages.txt): %s"
                         % (what, ", ".join(bad)))


if __name__ == "__main__":
    bad = reserved(sys.argv[1:])
    for n in bad:
        print("reserved: %s" % n)
    sys.exit(1 if bad else 0)
