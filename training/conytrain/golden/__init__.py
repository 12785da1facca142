"""Golden files for the C tests: their generators and the reproducibility check."""
