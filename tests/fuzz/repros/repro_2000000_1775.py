"""framejit fuzz repro: run seed 2000000, program 1775 (program seed 2001775), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: A view was created in no_grad mode and its base or another
    view of its base has been modified inplace with grad mode enabled. This view is the output of a function
    that returns multiple views. Such functions do not allow the output views to be modified inplace. You
    should replace the inplace operation by an out-of-place one.; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True

class Box:
    pass
g_w = torch.randn(8, 8)

def program(x):
    global g_w
    for e4 in g_w:
        t5 = (x + e4) * g_w[:, None]
        g_w *= t5.sum()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
