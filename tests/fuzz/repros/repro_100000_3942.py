"""framejit fuzz repro: run seed 100000, program 3942 (program seed 103942), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['y']: eager NoneType None, compiled a tensor

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True
g_w = torch.randn(4, 4)

class Mod8(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.LayerNorm(4)

    def forward(self, a):
        h = self.layer(a)
        return h
m_9 = Mod8()

def program(x, y, z):
    lst10 = [z.sub(z), x.abs().sqrt()]
    r11 = m_9(y)

    def inner12(a):
        return torch.square(g_w)
    r14 = inner12(torch.flip(g_w, [0]))
    lst15 = [torch.max(r14, dim=-2).values, r11.sum(0)]
    with torch.no_grad():
        vals17 = lst10[0].norm().reshape(1).tolist()
    t24 = torch.where(g_w < lst15[0], g_w, lst15[0])
    return lst10


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
