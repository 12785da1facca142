"""The audio recipes: log-mel reference, the default VGGish-CNN and YAMNet-token models, the AudioSet tagger, training on your own files, evaluation through the C tools."""
