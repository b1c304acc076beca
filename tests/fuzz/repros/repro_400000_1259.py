"""framejit fuzz repro: run seed 400000, program 1259 (program seed 401259), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: Output 0 of Select is a view and is being modified inplace.
    This view is the output of a function that returns multiple views. Such functions do not allow the output
    views to be modified inplace. You should replace the inplace operation by an out-of-place one.; compiled
    did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

class Box:
    pass

def program(x):
    x = torch.mul(x, x)
    for e5 in x:
        e5[0] = e5[e5 > 0].sum()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
