"""framejit fuzz repro: run seed 200000, program 5521 (program seed 205521), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: Output 1 of Unbind is a view and its base or another view of
    its base has been modified inplace. This view is the output of a function that returns multiple views.
    Such functions do not allow the output views to be modified inplace. You should replace the inplace
    operation by an out-of-place one.; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_t = torch.randn(6)

def make1(c):
    w = g_t * c

    def fn(t):
        return (t + w).relu()
    return fn

def program(y):
    r2 = make1(2.0)(torch.cat([y, y], dim=0))
    for e7 in r2:
        r2.sub_(torch.mul(e7, e7))


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
