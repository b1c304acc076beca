"""framejit fuzz repro: run seed 1000000, program 2516 (program seed 1002516), minimised.

Outcome: compiled_raised (call:InternalError)
call 2 (N=5, float32): eager returned; compiled raised InternalError: internal error while compiling program
    (/tmp/fz11m/work-hirjazef/candidate_2516_114.py:18): AttributeError: 'NoneType' object has no attribute
    'cdata'
(set framejit.config.suppress_errors = True to run such frames as Python instead)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True

class Mod0(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv1d(2, 3, 3, padding=1)
        self.calls = 0

    def forward(self, a):
        self.calls += 1
        h = self.layer(a.reshape(a.shape[0], 2, 4))
        return h.relu()
m_1 = Mod0()

def program(x):
    r3 = m_1(x.cumsum(-1))
    t5 = torch.cat([x, torch.full_like(x, 2)], dim=1)
    lst6 = [t5[-1], t5[-1]]
    t7 = lst6[0]
    r8 = m_1(x.abs().sqrt())
    t7.add_(r8.min(), alpha=2)
    vals11 = (x * x).reshape(-1).tolist()
    t5 *= t5


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
