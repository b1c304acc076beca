"""framejit fuzz repro: run seed 2900000, program 2165 (program seed 2902165), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: one of the variables
    needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [4]], graph
    input 2, is at version 1; expected version 3 instead (framejit checks the tensors eager's ops saved for
    backward)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True
g_t = torch.randn(4)

def make0(c):

    def fn(t):
        return t * c + 1
    return fn

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(4)
        self.calls = 0

    def forward(self, a):
        self.calls += 1
        h = self.layer(a)
        return h.relu()
m_2 = Mod1()

def program(x, y):
    t3 = x
    for i4 in range(3):
        r6 = m_2.train(m_2.calls % 2 == 0)(torch.full_like(y, 2))
        r7 = make0(-1.5)(torch.add(g_t, t3, alpha=2))
        x = r6 - r7
    return x


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
