"""framejit fuzz repro: run seed 2300000, program 3259 (program seed 2303259), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 0 (N=3, float32): eager returned; compiled raised BackendCompilerFailed: backend 'aot_eager' raised
    AssertionError: any_leaf=True != all_leaf=False for outer_indices=[0, 1]

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,))]
TRAIN = True

def program(x, y):
    with torch.set_grad_enabled(False):
        for e9 in x:
            print('sum', round(float(y.sum()), 3))
            y = torch.square(e9)
            x.abs_()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
