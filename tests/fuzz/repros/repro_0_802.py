"""framejit fuzz repro: run seed 0, program 802 (program seed 802), minimised.

Outcome: compiled_raised (call:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: Boolean value of Tensor with more than
    one value is ambiguous
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

def program(x, y):
    global g_t
    for i9 in range(3):
        g_t += g_t
        y.mul_(2.0)
        if x.max() > 1:
            pass


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
