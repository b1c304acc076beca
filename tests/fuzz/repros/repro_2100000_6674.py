"""framejit fuzz repro: run seed 2100000, program 6674 (program seed 2106674), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['y']: eager a tensor, compiled NoneType None
torch.compile on the same program: mismatch grads.type

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,))]
TRAIN = True

def helper0(a, scale=2.0):
    return a / a * scale

def program(x, y):
    t6 = torch.arange(4)
    r7 = helper0(y, scale=0.5)
    y = y ** 2 + y
    t8 = t6
    with torch.set_grad_enabled(False):
        r7 += t6 - t8
        vals10 = torch.where(x > 0, x, x).reshape(-1).tolist()
        x.copy_(y - r7)
    return r7


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
