"""conytrain: the Python side of gst-cony — float64 references (ref/), model training and
export, converters (cnn/), golden generation (golden/), the audio and video recipes (audio/,
video/), the audio data set builder (data/) and the PyTorch benchmarks (bench/).

The scripts in training/ are thin entry points onto these modules; Python puts a script's
directory first on sys.path, so they import this package as it is. Tests get training/ on
PYTHONPATH from tests/meson.build (or run from training/).
"""

import os

# training/ (where the scripts are) and the repository root
TRAINING = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TRAINING)
