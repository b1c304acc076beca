"""framejit fuzz repro: run seed 200000, program 9120 (program seed 209120), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [3, 8]], which is output 0 of
    Sub, is at version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation
    that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True

def helper0(a, b, scale=2.0):
    a.t().mul_(0.5)

def program(x, y):
    x.sub_(torch.exp(x.clamp(max=3)))
    if (y.min() > 0).any():
        pass
    r24 = helper0(torch.tanh(y), y / y, scale=0.5)
    t25 = y.relu().unsqueeze(0)
    y = x
    v26 = y.sum().item()
    return t25


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
