"""framejit fuzz repro: run seed 100000, program 658 (program seed 100658), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [8]] is at version 8; expected
    version 0 instead. Hint: enable anomaly detection to find the operation that failed to compute its
    gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

class Mod3(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(8, 5), torch.nn.ReLU(), torch.nn.Linear(5, 8))

    def forward(self, a):
        h = self.layer(a)
        return h.relu()
m_4 = Mod3()

def program(x, y):
    r7 = m_4(torch.flip(g_t, [0]))
    t8 = torch.cat([x < 0, x + y], dim=0)
    j9 = 0
    while j9 < 4:
        j9 += 1
        if torch.log1p(r7.abs()).max() > 1:
            pass
    for e13 in g_t:
        r7 *= e13
    lst16 = [t8.norm(), x.amax()]
    p17, *rest19 = lst16
    return p17


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
