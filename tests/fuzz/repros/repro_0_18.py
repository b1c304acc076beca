"""framejit fuzz repro: run seed 0, program 18 (program seed 18), minimised.

Outcome: compiled_raised (call:IndexError)
call 0 (N=3, float32): eager returned; compiled raised IndexError: slice() cannot be applied to a 0-dim
    tensor.
torch.compile on the same program: compiled_raised call:IndexError

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', (4,)), ('list', 2, ('N', 4))]
TRAIN = True
g_t = torch.randn(4)

class Mod5(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 4))
        self.register_buffer('total', torch.zeros(()))

    def forward(self, a):
        h = self.layer(a)
        self.total += h.detach().sum()
        return torch.tanh(h)
m_6 = Mod5()

def program(y, xs):
    r7 = m_6(torch.minimum(g_t, g_t))
    g_t.add_(y)
    xs[0][0] = r7 / r7
    t9 = y
    v13 = int((t9 @ t9).argmax())
    t14 = r7[1:].sub(y.amin(0)).view(-1)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
