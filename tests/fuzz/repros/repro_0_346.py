"""framejit fuzz repro: run seed 0, program 346 (program seed 346), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['x']: eager NoneType None, compiled a tensor
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True

class Box:
    pass

def program(x, y):
    j8 = 0
    while j8 < 1:
        j8 += 1
        if y[1:].abs().sum() > 2:
            pass
    x.t().mul_(0.5)
    t13 = y[1:]
    t14 = torch.maximum(t13, torch.sin(t13))[torch.maximum(t13, torch.sin(t13)) > 0].sum()
    return t14


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
