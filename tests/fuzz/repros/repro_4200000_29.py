"""framejit fuzz repro: run seed 4200000, program 29 (program seed 4200029), minimised.

Outcome: mismatch (return.value)
call 2 (N=5, float32): return tensor: values differ (Mismatched elements: 2 / 40 (5.0%); Greatest absolute
    difference: 5.737990379333496 at index (4, 6) (up to 4e-05 allowed)); eager [-1.0408011674880981,
    0.9166041612625122, -1.3041903972625732, -1.1096783876419067, -1.218778133392334, -3.7654829025268555]...,
    compiled [-1.0408011674880981, 0.9166041612625122, -1.3041903972625732, -1.1096783876419067,
    -1.218778133392334, -3.7654826641082764]...
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}, {'reuse': True}, {'n': 5, 'dtype': 'float32', 'seed': 2, 'bump': 1}]
COMPILE = {'backend': 'inductor'}
g_w = torch.randn(8, 8)

def program(x, y):
    for e3 in x:
        y.copy_(x / x)
        e3[e3 > 1] = torch.sum(e3)
        if g_w[:, 1].sum() > 0:
            pass
    return x


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
