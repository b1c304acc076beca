"""framejit fuzz repro: run seed 1100000, program 495 (program seed 1100495), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 2 (N=5, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [5, 6]] is at version 1;
    expected version 0 instead

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True

class Mod2(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 3))
        return h
m_3 = Mod2()

def program(x):
    lst4 = [x.sum(), x.std()]
    if x.sum().sum() > 0:
        pass
    t13 = torch.maximum(torch.cat([x, x], dim=0), lst4[0].abs())
    r15 = m_3(torch.where(t13 < t13, t13, t13))
    x.mul_(torch.clamp(x, -1, 1))
    return r15


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
