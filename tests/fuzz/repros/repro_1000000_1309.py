"""framejit fuzz repro: run seed 1000000, program 1309 (program seed 1001309), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [3]] is at version 1; expected version 0
    instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with
    torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', (6,)), ('dict', ('a', 'b'), ('N', 6))]
TRAIN = True

def program(y, d):

    def inner1(a):
        return y - y
    t3 = torch.max(-d['b'], dim=1).values
    r4 = inner1(y)
    t3.mul_(t3.detach())
    print(len(d))
    t5 = r4[0]
    t6 = t3[None].roll(1, 0).matmul(t3[None].roll(1, 0).transpose(0, 1))
    return t6


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
