"""framejit fuzz repro: run seed 0, program 304 (program seed 304), minimised.

Outcome: compiled_raised (call:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: Boolean value of Tensor with more than
    one value is ambiguous
torch.compile on the same program: compiled_raised backward:RuntimeError

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
g_t = torch.randn(4)

def program(y):
    global g_t
    y.fill_(1)
    g_t -= g_t
    if y.abs().sum() > 2:
        pass


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
