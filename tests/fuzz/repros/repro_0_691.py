"""framejit fuzz repro: run seed 0, program 691 (program seed 691), minimised.

Outcome: mismatch (return.value)
call 0 (N=3, float32): return tensor: values differ (Mismatched elements: 5 / 8 (62.5%); Greatest
    absolute difference: 2.1787893772125244 at index (2,) (up to 1e-05 allowed)); eager
    [1.5409960746765137, 0.0, 0.0, 0.5684312582015991, 0.0, 0.0]..., compiled [0.5409960746765137,
    -0.293428897857666, -2.1787893772125244, 0.5684312582015991, -1.0845223665237427,
    -1.3985954523086548]...

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager` when
TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

def program(x):
    global g_t
    x.neg_()
    t0 = g_t.masked_fill(g_t < 0, 0)
    g_t -= t0.to(torch.int64)
    return t0


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
