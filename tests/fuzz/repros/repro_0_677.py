"""framejit fuzz repro: run seed 0, program 677 (program seed 677), minimised.

Outcome: mismatch (return.shape)
call 0 (N=3, float32): return tensor: eager shape (8, 8), compiled ()
torch.compile on the same program: mismatch return.shape

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_w = torch.randn(8, 8)

class Mod0(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(8)
        self.calls = 0
        self.register_buffer('total', torch.zeros(()))

    def forward(self, a):
        h = self.layer(a)
        self.total += h.detach().sum()
m_1 = Mod0()

def program(x):
    r3 = m_1.train(m_1.calls % 2 == 0)(torch.maximum(g_w, g_w))
    t7 = g_w
    t8 = torch.softmax(t7, dim=-1)
    x -= x.flatten(1)
    return t8


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
