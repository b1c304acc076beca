"""framejit fuzz repro: run seed 0, program 19 (program seed 19), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [8]], which is output 0 of
    torch::autograd::CopyBackwards, is at version 1; expected version 0 instead. Hint: enable anomaly
    detection to find the operation that failed to compute its gradient, with
    torch.autograd.set_detect_anomaly(True, check_nan=False).
torch.compile on the same program: compiled_raised call:BackendCompilerFailed

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', (8,)), ('dict', ('a', 'b'), ('N', 8))]
TRAIN = True

def make1():
    n = 0

    def fn(t):
        return t * n
    return fn

def program(y, d):
    t12 = y
    t19 = torch.where(d['b'] < y, d['b'], y)
    t12 *= torch.add(t12, y, alpha=2)
    r20 = make1()(torch.cat([t19, t19], dim=0))
    return r20


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
