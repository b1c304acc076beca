"""framejit.fuzz: a differential fuzzer (placeholder docstring)."""
