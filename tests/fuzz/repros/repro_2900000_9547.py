"""framejit fuzz repro: run seed 2900000, program 9547 (program seed 2909547), minimised.

Outcome: mismatch (call.exception_message)
call 1 (same argument objects again): RuntimeError message: eager 'a leaf Variable that requires grad is being
    used in an in-place operation.', compiled 'Output 0 of Select is a view and is being modified inplace.
    This view is the output of a function that returns multiple views. Such functions do not allow the output
    views to be modified inplace. You should replace the inplace operation by an out-of-place one.'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = False
g_log = []

class Mod5(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 3))
        return h
m_6 = Mod5()

def program(x):
    r7 = m_6(torch.cat([x, x], dim=0))
    t8 = r7.neg().cumsum(-1)
    r9 = m_6(x)
    g_log.extend([x[0], x[0]])
    for e19 in list(g_log):
        e19[e19 > 1] = r9.amax()
    for e25 in t8:
        e25[-1] = e25[-1]


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
