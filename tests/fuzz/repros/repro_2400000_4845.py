"""framejit fuzz repro: run seed 2400000, program 4845 (program seed 2404845), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [6, 2, 3]], which is output 0 of AsStrided, is
    at version 2; expected version 1 instead. Hint: enable anomaly detection to find the operation that failed
    to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not
    raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True

def program(y):
    t5 = torch.mm(y.t(), y).view(*torch.mm(y.t(), y).shape[:-1], 2, 3)
    t6 = y.matmul(y.transpose(0, 1))
    t5.exp_()
    if torch.cat([t6, t6], dim=0).max() > 1:
        pass
    t5.add_(t5 - t5)
    return t5


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
