"""framejit fuzz repro: run seed 0, program 117 (program seed 117), minimised.

Outcome: compiled_raised (call:InternalError)
call 2 (N=5, float32): eager returned; compiled raised InternalError: internal error while compiling
    program (program_117.py:17): IndexError: list index out of range (set
    framejit.config.suppress_errors = True to run such frames as Python instead)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager` when
TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
g_w = torch.randn(4, 4)

class Mod5(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 2))
        h = h.flatten(1)
m_6 = Mod5()

def program(x):
    t7 = torch.minimum(x, torch.stack([x.detach(), torch.mul(x, x)]))
    r8 = m_6(g_w.relu())


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
