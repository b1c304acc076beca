"""framejit fuzz repro: run seed 6200800, program 3104 (program seed 6203904), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [3, 2]], which is output 0 of AsStrided, is at
    version 3; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to
    compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not
    raise

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}]
COMPILE = {'backend': 'aot_eager'}

def program(y):
    t11 = (y * y)[..., 1:3]
    t12 = torch.where(t11.max() > 0, t11.max(), torch.tensor(0.5)).sub(y)
    for e14 in t12:
        with torch.no_grad():
            v15 = int(y[..., 0].argmax())
        t11[-1] = e14[-1]
    return t11


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
