"""eval_default_audio's per-recording report: the recordings with the most wrong
full-window steps (and what they were heard as), the headline without the recordings a
pattern names, and the bootstrap's per-recording counts, on hand-made results."""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from eval_default_audio import accuracy_without, by_recording, worst_recordings  # noqa: E402

LABELS = ["speech", "music", "noise", "alarm", "animal", "silence"]
N = 3          # window: steps 0 and 1 are warm-up and never counted


def clip(y, pred, group, origin="real"):
    return (y, origin, np.array(pred), group)


RESULTS = [
    clip(2, [1, 1, 1, 1, 2], "pkg:/toilet.ogg"),      # full-window: 1, 1, 2 -> 1 of 3 right
    clip(2, [0, 0, 1, 0, 2], "pkg:/toilet.ogg"),      # full-window: 1, 0, 2 -> 1 of 3 right
    clip(1, [0, 0, 1, 1, 1], "pkg:/song.ogg"),        # all 3 right
    clip(0, [2, 2, 2, 0, 0], "pkg:/talk"),            # 2, 0, 0 -> 2 of 3 right
    clip(0, [2, 2, 2, 2, 2], "synth:tts", "synth"),   # synthesised: never in these counts
    clip(5, [5, 5, 5, 5, 5], "pkg:/song.ogg"),        # its quiet copy: class 5, all right
]


class EvalReport(unittest.TestCase):
    def test_by_recording_counts_full_window_steps_of_real_clips(self):
        got = sorted(map(tuple, by_recording(RESULTS, N).tolist()))
        self.assertEqual(got, [(2.0, 3.0), (2.0, 6.0), (6.0, 6.0)])   # a recording, both classes

    def test_worst_recordings_first_with_what_they_were_heard_as(self):
        lines = worst_recordings(LABELS, RESULTS, N)
        self.assertEqual(lines[2], "| `pkg:/toilet.ogg` | noise | 4 / 6 | music 3, speech 1 |")
        self.assertEqual(lines[3], "| `pkg:/talk` | speech | 1 / 3 | noise 1 |")
        self.assertEqual(len(lines), 4)        # the all-right recordings are not listed

    def test_a_recordings_classes_are_listed_apart(self):
        mixed = [clip(2, [2, 2, 4, 4, 2], "pkg:/flush.ogg"), clip(5, [5, 5, 5, 2, 2], "pkg:/flush.ogg")]
        lines = worst_recordings(LABELS, mixed, N)
        self.assertEqual(lines[2:], ["| `pkg:/flush.ogg` | noise | 2 / 3 | animal 2 |",
                                     "| `pkg:/flush.ogg` | silence | 2 / 3 | noise 2 |"])

    def test_accuracy_without_a_pattern(self):
        self.assertEqual(accuracy_without(RESULTS, N, r"toilet"), (8, 9, 1))
        self.assertEqual(accuracy_without(RESULTS, N, r"nothing"), (10, 15, 0))


if __name__ == "__main__":
    unittest.main()
