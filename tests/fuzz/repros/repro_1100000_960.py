"""framejit fuzz repro: run seed 1100000, program 960 (program seed 1100960), minimised.

Outcome: mismatch (globals.value)
call 0 (N=3, float32): globals ['m_2']['calls']: eager 1, compiled 0

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_t = torch.randn(6)

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(6)
        self.calls = 0

    def forward(self, a):
        self.calls += 1
        h = self.layer(a)
m_2 = Mod1()

def program(x):
    x[:, 0] = x.max()
    t4 = g_t.detach().sub(x.double()) * 0.5
    lst5 = [torch.nn.functional.relu(t4), g_t * t4]
    r6 = m_2(torch.minimum(lst5[0], g_t))


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
