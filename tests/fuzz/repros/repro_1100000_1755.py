"""framejit fuzz repro: run seed 1100000, program 1755 (program seed 1101755), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [3, 6]] is at version 1;
    expected version 0 instead

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', ('N', 6))]
TRAIN = True

class Mod3(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.LayerNorm(6)
        self.register_buffer('total', torch.zeros(()))

    def forward(self, a):
        h = self.layer(a)
        self.total += h.detach().sum()
m_4 = Mod3()

def program(y, z):
    r5 = m_4(y * 0.5)
    dd12 = {'a': z.masked_fill(z < 0, 0), 'b': z.masked_fill(z < 0, 0) * 2}
    v13 = z.std().sum().item()
    z.exp_()
    t14 = dd12['a'] - y
    t15 = torch.cat([t14[:2], t14[:2]], dim=1).relu()
    return t15


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
