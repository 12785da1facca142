"""eval_default_audio's per-recording report: the recordings with the most wrong
full-window steps (and what they were heard as), the headline without the recordings a
pattern names, and the bootstrap's per-recording counts, on hand-made results; and the
recording protocol's streams (context_stream): a clip after n - 1 tokens of its own
recording's clips before it, cycled, itself when it is alone."""

import unittest

import numpy as np

from conytrain.audio.eval_default import (accuracy_without, by_recording, class_mean,
                                         context_stream, embed_args, summarise,
                                         worst_recordings)

LABELS = ["speech", "music", "noise", "alarm", "animal", "silence"]
N = 3          # window: steps 0 and 1 are warm-up and never counted


def clip(y, pred, group, origin="real"):
    """A clip's results: its steps from a fresh state, the full-window ones scored."""
    pred = np.array(pred)
    return dict(y=y, origin=origin, group=group, full=pred[N - 1:], fresh=pred)


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
        got = sorted(map(tuple, by_recording(RESULTS).tolist()))
        self.assertEqual(got, [(2.0, 3.0), (2.0, 6.0), (6.0, 6.0)])   # a recording, both classes

    def test_worst_recordings_first_with_what_they_were_heard_as(self):
        lines = worst_recordings(LABELS, RESULTS)
        self.assertEqual(lines[2], "| `pkg:/toilet.ogg` | noise | 4 / 6 | music 3, speech 1 |")
        self.assertEqual(lines[3], "| `pkg:/talk` | speech | 1 / 3 | noise 1 |")
        self.assertEqual(len(lines), 4)        # the all-right recordings are not listed

    def test_a_recordings_classes_are_listed_apart(self):
        mixed = [clip(2, [2, 2, 4, 4, 2], "pkg:/flush.ogg"), clip(5, [5, 5, 5, 2, 2], "pkg:/flush.ogg")]
        lines = worst_recordings(LABELS, mixed)
        self.assertEqual(lines[2:], ["| `pkg:/flush.ogg` | noise | 2 / 3 | animal 2 |",
                                     "| `pkg:/flush.ogg` | silence | 2 / 3 | noise 2 |"])

    def test_accuracy_without_a_pattern(self):
        self.assertEqual(accuracy_without(RESULTS, r"toilet"), (8, 9, 1))
        self.assertEqual(accuracy_without(RESULTS, r"nothing"), (10, 15, 0))


class TokensOfTheClassifier(unittest.TestCase):
    """The C path's tokens follow the classifier's config: stride and CNN mode (rule 36)."""

    def test_window_tokens_by_default(self):
        self.assertEqual(embed_args({"frontend": {"cnn": "x"}}), ["--stride", "25"])
        self.assertEqual(embed_args({}), ["--stride", "25"])

    def test_continual_tokens_at_their_stride(self):
        cfg = {"frontend": {"stride_frames": 32, "cnn_mode": "continual"}}
        self.assertEqual(embed_args(cfg), ["--stride", "32", "--mode", "continual"])

    def test_class_mean_over_classes_with_steps(self):
        # speech 2/3, music 3/3, noise 1/3 + 1/3 = 2/6, silence 3/3; the others have none
        s = summarise(LABELS, N, RESULTS, "real")
        self.assertAlmostEqual(class_mean(s), 100 * (2 / 3 + 1 + 2 / 6 + 1) / 4)


class RecordingProtocol(unittest.TestCase):
    # three clips of one recording, 4 tokens each, token value = clip * 10 + step
    CLIPS = [np.arange(4)[:, None] + 10.0 * c for c in range(3)]

    def test_context_is_the_clips_before_cycled(self):
        stream, c = context_stream(self.CLIPS, 0, 7)       # needs 6 tokens of context
        self.assertEqual(c, 8)                              # two whole clips: 2, then 1
        self.assertEqual(stream[:, 0].tolist(), [10, 11, 12, 13, 20, 21, 22, 23, 0, 1, 2, 3])
        stream, c = context_stream(self.CLIPS, 2, 4)       # clip 1 is enough
        self.assertEqual((c, stream[:4, 0].tolist()), (4, [10, 11, 12, 13]))

    def test_a_lone_clip_is_its_own_context(self):
        stream, c = context_stream(self.CLIPS[:1], 0, 9)
        self.assertEqual((c, stream[:, 0].tolist()), (8, [0, 1, 2, 3] * 3))

    def test_window_of_one_needs_no_context(self):
        stream, c = context_stream(self.CLIPS, 1, 1)
        self.assertEqual((c, stream[:, 0].tolist()), (0, [10, 11, 12, 13]))


if __name__ == "__main__":
    unittest.main()
