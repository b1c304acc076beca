"""framejit fuzz repro: run seed 0, program 103 (program seed 103), minimised.

framejit internal error, the frame then runs as Python:
framejit internal error on __resume_at_956_3 (program_103.py:31), running it as
    Python: KeyError: 1808

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree or framejit falls back on an internal error.
"""
import torch
import framejit
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = False
g_w = torch.randn(8, 8)

def helper0(a, *, scale=2.0):
    return g_w.new_ones(8) * scale

@framejit.disable
def opaque3(t):
    pass

def program(x, y):
    r4 = helper0(torch.ones_like(y))
    p12, p13 = (torch.add(x, x, alpha=2), torch.where(g_w > 0, g_w, r4))
    for e15 in p12:
        for i16 in range(4):
            r18 = opaque3(p12 + y)
        t20 = p13.abs().sqrt() - r4.sigmoid()
        t21 = (y - y).tanh().cumprod(0) @ (y - y).tanh().cumprod(0).t()
        if torch.log1p(t20.abs()).max() > 1:
            pass


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, internal_errors=True)
