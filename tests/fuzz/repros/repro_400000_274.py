"""framejit fuzz repro: run seed 400000, program 274 (program seed 400274), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [3, 6]], which is output 0 of
    Add, is at version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation
    that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,)), ('dict', ('a', 'b'), ('N', 6))]
TRAIN = True

def helper0(a, b, scale=2.0):
    return b.reshape(-1) * scale

def program(x, y, d):
    x += torch.maximum(x, y)
    if y.masked_fill(y < 0, 0).max() > 1:
        pass
    p10, p11 = (torch.nn.functional.normalize(y, dim=-1), x + x)
    t12 = y[torch.tensor([0, 2])]
    r18 = helper0(p10, p10.reshape(-1))
    d['b'] = x - 0.25
    p10.mul_(d['b'].norm())
    t12[-1] = r18[r18 > 0].sum()
    return t12


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
