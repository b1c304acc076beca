"""framejit fuzz repro: run seed 2200000, program 7343 (program seed 2207343), minimised.

Outcome: mismatch (grads.value)
call 0 (N=3, float32): grads ['y']: values differ (Mismatched elements: 24 / 24 (100.0%); Greatest absolute
    difference: nan at index (0, 0) (up to 1e-05 allowed)); eager [inf, inf, inf, inf, inf, inf]..., compiled
    [nan, nan, nan, nan, nan, nan]...
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_w = torch.randn(8, 8)

def program(y):
    try:
        if (y[[1, 0]] > 0).any():
            pass
    except (ValueError, KeyError) as err8:
        pass
    t10 = y / torch.zeros(8)
    t4 = t10.sum(0, keepdim=True)
    v11 = float(torch.minimum(t4, g_w).amax())
    return t10


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
