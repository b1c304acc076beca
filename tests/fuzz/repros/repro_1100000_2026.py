"""framejit fuzz repro: run seed 1100000, program 2026 (program seed 1102026), minimised.

Outcome: mismatch (globals.keys)
call 0 (N=3, float32): globals ['m_1']: eager keys ["'training'", "'calls'", "'last'"], compiled
    ["'training'", "'calls'"]

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8)), ('list', 2, ('N', 8))]
TRAIN = True

class Mod0(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(8)
        self.calls = 0

    def forward(self, a):
        h = self.layer(a)
        self.last = h.detach()
m_1 = Mod0()

def program(x, y, xs):
    t3 = y.double().sub(torch.log1p(xs[0].abs()))
    x += torch.maximum(xs[0], y)
    for e6 in (x, x):
        r7 = m_1.train(m_1.calls % 2 == 0)(e6 - e6)
        r8 = m_1(torch.square(t3))


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
