"""framejit fuzz repro: run seed 200000, program 2315 (program seed 202315), minimised.

Outcome: mismatch (grads.value)
call 0 (N=3, float32): grads ['y']: values differ (Mismatched elements: 5 / 6 (83.3%); Greatest absolute
    difference: 6.0 at index (2,) (up to 1e-05 allowed)); eager [-2.068434476852417, 6.284393310546875,
    5.656081199645996, -7.172257423400879, 6.119896411895752, 0.990081787109375], compiled
    [-2.068434476852417, 4.284393310546875, -0.3439185619354248, -9.172258377075195, 2.119896411895752,
    -3.009918212890625]

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,))]
TRAIN = True
g_t = torch.randn(6)

def program(x, y):
    t3 = torch.mul(torch.where(x < g_t, x, g_t).sub(g_t.roll(1, 0)), -y)
    g_t.add_(2.0)
    return t3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
