"""build_audio_dataset.drop_families (data set version 7): the planned clips of the
mislabelled families are removed before rendering, every other clip stays, in order."""

import unittest

from conytrain.data import build as bad


class DropMislabelled(unittest.TestCase):
    def test_fillets_english_effects_are_listed(self):
        # fillets-ng-data's en/ directories: sound effects, not voices (see MISLABELLED_FAMILIES)
        self.assertIn("fillets_en", bad.MISLABELLED_FAMILIES)
        self.assertNotIn("fillets_nl", bad.MISLABELLED_FAMILIES)

    def test_jobs_of_the_family_go_the_rest_stays(self):
        jobs = [{"path": "clips/train/speech/c%d.wav" % i, "family": fam}
                for i, fam in enumerate(["fillets_nl", "fillets_en", "tuxpaint_desc", "fillets_en"])]
        kept = bad.drop_families(jobs, bad.MISLABELLED_FAMILIES)
        self.assertEqual([j["family"] for j in kept], ["fillets_nl", "tuxpaint_desc"])
        self.assertEqual([j["path"] for j in kept], [jobs[0]["path"], jobs[2]["path"]])
        self.assertIs(kept[0], jobs[0])     # the kept plans are untouched


if __name__ == "__main__":
    unittest.main()
