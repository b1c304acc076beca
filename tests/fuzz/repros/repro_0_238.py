"""framejit fuzz repro: run seed 0, program 238 (program seed 238), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [3, 6]], which is output 0 of
    torch::autograd::CopySlices, is at version 1; expected version 0 instead. Hint: enable anomaly detection
    to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True,
    check_nan=False).; compiled did not raise
torch.compile on the same program: mismatch backward.exception_missing

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,)), ('box', ('N', 6), 1)]
TRAIN = True

class Box:

    def __init__(self, t, n):
        self.t = t

def combine3(*ts, scale=1.0, **kw):
    out = ts[0]
    return out * scale

def program(x, y, obj):
    r4 = combine3(torch.where(x < y, x, y), neg=True)
    t5 = torch.maximum(r4, -x)
    t8 = torch.cat([t5, r4], dim=1).amax(-2)
    x[torch.tensor([0, 2])] = t8.amax().to(x.dtype)
    print('step')
    t12 = torch.mul(x, obj.t)
    r4[-1] = torch.sort(y, dim=-1).values
    t19 = t12[[1, 0]]
    return t19


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
