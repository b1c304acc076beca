"""framejit fuzz repro: run seed 0, program 115 (program seed 115), minimised.

Outcome: compiled_raised (call:InternalError)
call 2 (N=5, float32): eager returned; compiled raised InternalError: internal error while compiling
    program (program_115.py:10): IndexError: list index out of range (set
    framejit.config.suppress_errors = True to run such frames as Python instead)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager` when
TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_t = torch.randn(6)
g_w = torch.randn(6, 6)

def helper0(a, scale=2.0):
    pass

def program(x):
    r2 = helper0(torch.softmax(x, dim=-1), scale=0.25)
    t3 = torch.mul(torch.mul(g_t.sub(g_w), torch.minimum(g_w, g_t)), -g_w)
    t3[..., :2] = 0.5


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
