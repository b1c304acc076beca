"""framejit fuzz repro: run seed 0, program 374 (program seed 374), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: Output 0 of Select is a view and is being modified inplace.
    This view is the output of a function that returns multiple views. Such functions do not allow the output
    views to be modified inplace. You should replace the inplace operation by an out-of-place one.; compiled
    did not raise
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', ('N', 6))]
TRAIN = True

def program(x, y):
    t0 = torch.sin(x)
    for e2 in t0:
        v7 = int(y.norm().argmax())
        e2[-1].add_(1)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
