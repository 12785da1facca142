"""build_audio_dataset.drop_families (data set version 7): the clips of the mislabelled
families leave the manifest rows and the disk, every other clip stays."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))

import build_audio_dataset as bad  # noqa: E402


class DropMislabelled(unittest.TestCase):
    def test_fillets_english_effects_are_listed(self):
        # fillets-ng-data's en/ directories: sound effects, not voices (see MISLABELLED_FAMILIES)
        self.assertIn("fillets_en", bad.MISLABELLED_FAMILIES)
        self.assertNotIn("fillets_nl", bad.MISLABELLED_FAMILIES)

    def test_rows_and_files_of_the_family_go_the_rest_stays(self):
        with tempfile.TemporaryDirectory() as out:
            rows = []
            for i, fam in enumerate(["fillets_nl", "fillets_en", "tuxpaint_desc", "fillets_en"]):
                path = "clips/train/speech/c%d.wav" % i
                os.makedirs(os.path.join(out, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(out, path), "wb") as f:
                    f.write(b"x")
                rows.append({"path": path, "family": fam})
            kept = bad.drop_families(rows, bad.MISLABELLED_FAMILIES, out)
            self.assertEqual([r["family"] for r in kept], ["fillets_nl", "tuxpaint_desc"])
            for i, exists in enumerate([True, False, True, False]):
                self.assertEqual(os.path.exists(os.path.join(out, rows[i]["path"])), exists, i)


if __name__ == "__main__":
    unittest.main()
