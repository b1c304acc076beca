"""framejit fuzz repro: run seed 2900000, program 5889 (program seed 2905889), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: Trying to backward through
    the graph a second time (or directly access saved tensors after they have already been freed). Saved
    intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify
    retain_graph=True if you need to backward through the graph a second time or if you need to access saved
    tensors after calling backward.

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,)), ('list', 2, ('N', 8))]
TRAIN = True
g_log = []

def combine0(*ts, scale=1.0, **kw):
    out = ts[0]
    return out * scale

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(8, 3), torch.nn.ReLU(), torch.nn.Linear(3, 8))

    def forward(self, a):
        h = self.layer(a)
        return h
m_2 = Mod1()

def program(x, y, xs):
    r3 = m_2(torch.maximum(x, x))
    r4 = combine0(*xs, bias=1.0)
    g_log.append(y.cumsum(-1))
    r3.add_(torch.nn.functional.gelu(r4), alpha=2)
    return g_log


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
