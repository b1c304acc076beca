"""framejit fuzz repro: run seed 200000, program 1424 (program seed 201424), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [3, 1]], which is output 0 of AsStrided, is at
    version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to
    compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not
    raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

class Box:
    pass

def program(y):
    t3 = torch.tanh(y.unsqueeze(-1))
    t5 = t3.sum(0)
    t6 = torch.minimum(t5[1:], torch.tensor(2.0)).amin(0)
    v7 = float(torch.add(y, y, alpha=2).amax())
    t5 -= 0.25
    return t6


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
