"""framejit fuzz repro: run seed 2300000, program 2117 (program seed 2302117), minimised.

Outcome: compiled_raised (call:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: A view was created in no_grad mode and is
    being modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it
    is forbidden. You can clarify your code by moving both the view and the inplace either both inside the
    no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be
    tracked).

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,)), ('list', 2, ('N', 6))]
TRAIN = True

def program(x, y, xs):
    t3 = y.amin(0)
    p4, p5 = (x[None], xs[0])
    with torch.set_grad_enabled(False):
        print(f'max={float(p4.max()):.3f}')
    p4 += 2.0
    return t3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
