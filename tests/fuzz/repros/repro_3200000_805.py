"""framejit fuzz repro: run seed 3200000, program 805 (program seed 3200805), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: a leaf Variable that requires grad is being used in an in-
    place operation.; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True
g_w = torch.randn(4, 4)

def helper0(a, scale=2.0):
    return a.tanh().cumprod(0) * scale

def program(x, y):
    t7 = x + x
    t9 = g_w.unsqueeze(-1)
    r10 = helper0(t7 * 2, scale=-1.5)
    g_w[torch.tensor([0, 2])] = r10[[1, 0]].to(g_w.dtype)
    if (y[torch.tensor([0, 2])] > 0).any():
        pass
    t9.mul_(0.5)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
