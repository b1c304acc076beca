"""framejit fuzz repro: run seed 0, program 175 (program seed 175), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 0 (N=3, float32): eager returned; compiled raised BackendCompilerFailed: backend 'aot_eager' raised
    DynamicOutputShapeException: aten.nonzero.default
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', ('N', 6))]
TRAIN = True

def program(x, y):
    y[y > 1] = x[x > 0].sum()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
