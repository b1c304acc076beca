"""framejit fuzz repro: run seed 400000, program 146 (program seed 400146), minimised.

Outcome: mismatch (grads.value)
call 0 (N=3, float32): grads ['x']: values differ (Mismatched elements: 4 / 12 (33.3%); Greatest absolute
    difference: 1.9580965042114258 at index (1, 1) (up to 1e-05 allowed)); eager [-20.459354400634766,
    -3.1067609786987305, 9.469353675842285, 0.0, -0.0, -5.874290466308594]..., compiled [-20.459354400634766,
    -4.142347812652588, 9.469353675842285, 0.0, -0.0, -7.8323869705200195]...
torch.compile on the same program: mismatch grads.value

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True
g_w = torch.randn(4, 4)

def program(x, y):
    global g_w
    t3 = torch.minimum((x / y).unsqueeze(-1), g_w[None].cos())
    g_w *= 0.25
    return t3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
