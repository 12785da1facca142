"""training/train_av.sh fetches the Debian packages of the sets its call trains on, and no
more: set 1's for the shipped recipe and the grid, a `--` call's own --photo-set and
--sound-set otherwise. Run in a scratch tree with apt-get and dpkg-deb stubbed (they log
the package names), where the build that follows the fetch is missing and stops the
script."""

import os
import subprocess
import tempfile
import unittest

from conytrain import REPO
from conytrain.av import sources

STUB_APT = """#!/bin/sh
[ "$1" = download ] || exit 9
echo "$2" >> "$FETCH_LOG"
touch "$2_0_all.deb"
"""


def fetched(*args):
    """The packages train_av.sh ARGS downloads, in order, and its exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.join(REPO, "training"), os.path.join(tmp, "training"))
        stubs = os.path.join(tmp, "stubs")
        os.mkdir(stubs)
        for name, text in (("apt-get", STUB_APT), ("dpkg-deb", "#!/bin/sh\nexit 0\n")):
            with open(os.path.join(stubs, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(stubs, name), 0o755)
        log = os.path.join(tmp, "fetch.log")
        env = dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", FETCH_LOG=log)
        r = subprocess.run(["bash", os.path.join(tmp, "training", "train_av.sh"), *args],
                           env=env, capture_output=True, text=True, timeout=120)
        names = []
        if os.path.exists(log):
            with open(log) as f:
                names = f.read().split()
        return names, r.returncode, r.stderr


class FetchTest(unittest.TestCase):
    def check(self, args, photo_set, sound_set):
        names, rc, err = fetched(*args)
        self.assertNotEqual(rc, 0, "the scratch tree has no build: the script must stop there")
        self.assertIn("scripts/build.sh", err)
        self.assertEqual(names, sources.packages(photo_set, sound_set), err)

    def test_shipped_recipe_fetches_set_one(self):
        self.check((), 1, 1)
        self.assertLess(len(sources.packages(1, 1)), len(sources.packages(2, 2)))

    def test_grid_fetches_set_one(self):
        self.check(("--grid",), 1, 1)

    def test_a_call_fetches_its_own_sets(self):
        self.check(("--", "--work", "out/x", "--photo-set", "2", "--sound-set=2"), 2, 2)
        self.check(("--", "--sound-set", "2"), 1, 2)

    def test_a_set_that_does_not_exist_stops_before_any_download(self):
        names, rc, err = fetched("--", "--photo-set", "3")
        self.assertNotEqual(rc, 0)
        self.assertEqual(names, [])
        self.assertIn("--photo-set", err)


if __name__ == "__main__":
    unittest.main()
