"""framejit fuzz repro: run seed 0, program 49 (program seed 49), minimised.

framejit internal error, the frame then runs as Python:
framejit internal error on program (program_49.py:34), running it as Python:
    RuntimeError: Failed to compute stacksize, got negative size

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree or framejit falls back on an internal error.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = False

def program(z):
    with torch.enable_grad():
        try:
            if z[0].sum() > 0:
                raise ValueError(f'bad value 1')
        except ValueError as err5:
            pass


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, internal_errors=True)
