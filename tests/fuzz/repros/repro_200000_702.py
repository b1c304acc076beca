"""framejit fuzz repro: run seed 200000, program 702 (program seed 200702), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [8]] is at version 2; expected version 1
    instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with
    torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

def helper0(a, b, *, scale=2.0):
    v1 = float((g_t - b).amax())
    g_t[torch.tensor([0, 2])] = g_t.amax().to(g_t.dtype)

def program(x):
    g_t.relu_()
    t10 = x @ g_t.to(x.dtype)
    r11 = helper0(x - 0.25, **{'b': -x, 'scale': -1.5})
    return t10


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
