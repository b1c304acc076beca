"""framejit fuzz repro: run seed 100000, program 5792 (program seed 105792), minimised.

Outcome: compiled_raised (call:InternalError)
call 0 (N=3, float32): eager returned; compiled raised InternalError: internal error while compiling program,
    after a graph break (/tmp/fzx/work-0w87rgwf/candidate_5792_94.py:17): AssertionError: False != True
(set framejit.config.suppress_errors = True to run such frames as Python instead)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = False
g_w = torch.randn(4, 4)

class Mod3(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 2, 1))
        return h.relu()
m_4 = Mod3()

def program(z):
    r6 = m_4(z.relu())
    t13 = g_w[..., 1:3]
    g_w[..., :2] = r6[r6 > 0].sum()
    return t13


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
