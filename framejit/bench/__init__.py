"""`framejit bench`: a built-in model suite run eager and compiled side by side (see cli.py, runner.py)."""
