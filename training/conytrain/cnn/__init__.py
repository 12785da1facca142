"""CNN front ends: the VGGish-style PyTorch model and the converters to libcony's files (torchvggish, torchvision VGG, TFLite MobileNet)."""
