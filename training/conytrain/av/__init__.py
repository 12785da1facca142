"""The fused audio-video model (models/av/): its data (photographs and recordings from
Debian packages, sources.py), the camera shots and sound clips made of them (media.py),
their token caches (build.py) and the training and evaluation (train.py)."""
