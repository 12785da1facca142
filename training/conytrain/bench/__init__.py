"""PyTorch timings that the `cony bench` commands compare libcony with."""
