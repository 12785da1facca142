"""The default video model: generated clips, training, evaluation through GStreamer."""
