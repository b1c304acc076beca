"""framejit fuzz repro: run seed 100000, program 6194 (program seed 106194), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['m_2.layer.weight']: eager NoneType None, compiled a tensor
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,))]
TRAIN = True
g_t = torch.randn(4)

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 2))
        h = h.flatten(1)
        return h.relu()
m_2 = Mod1()

def program(x, y):
    lst4 = [g_t @ g_t, g_t @ g_t]
    with torch.no_grad():
        y = y + y
    r5 = m_2(x.detach())
    t6 = torch.maximum(x, x)
    t8 = r5.sum(-2, keepdim=True)
    t9 = torch.where(t8.new_ones(4) < y, t8.new_ones(4), y)
    for e11 in list(lst4):
        g_t.add_(t9.mean(-1))
        print('sum', round(float(t8.sum()), 3))
    t14 = torch.add(t8.matmul(t8.transpose(0, 1)), torch.flip(y * lst4[0], [0]), alpha=2)
    return t6


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
