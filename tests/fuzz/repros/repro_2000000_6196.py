"""framejit fuzz repro: run seed 2000000, program 6196 (program seed 2006196), minimised.

Outcome: mismatch (globals.value)
call 0 (N=3, float32): globals ['m_1'].state['layer.running_mean']: values differ (Mismatched elements: 4 / 4
    (100.0%); Greatest absolute difference: 0.0706014633178711 at index (2,) (up to 1e-05 allowed)); eager
    [-0.02727208100259304, -0.015408629551529884, -0.07844606041908264, 0.03149170055985451], compiled
    [-0.05181695520877838, -0.029276397079229355, -0.14904752373695374, 0.059834230691194534]

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True

class Mod0(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(4)

    def forward(self, a):
        h = self.layer(a)
m_1 = Mod0()

def program(y, z):
    for e3 in z:
        v4 = float(y.amax())
        z[:, 0] = torch.tensor(2.0)
        for i5 in range(min(e3.shape[0], 4)):
            r7 = m_1(y)
            r7[..., :2] = e3 @ e3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
