"""framejit fuzz repro: run seed 6500000, program 124 (program seed 6500124), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: view size is not compatible with input tensor's size and
    stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.;
    compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('list', 2, ('N', 8))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}]
COMPILE = {'backend': 'eager'}

class Box:
    pass
g_t = torch.randn(8)

def helper0(a, b, scale=2.0):
    return b.transpose(0, 1) * scale

def program(x, xs):
    r8 = helper0(g_t / x, xs[0].tanh().cumprod(0), scale=0.5)
    r8.masked_fill_(r8 > 0, 0)
    r8.view(-1).add_(1)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='inductor')
