"""framejit fuzz repro: run seed 6200800, program 568 (program seed 6201368), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: a leaf Variable that requires grad is being used in an in-
    place operation.; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 2, 3, 4))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}]
COMPILE = {'backend': 'eager'}
g_log = []

class Mod2(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(4)

    def forward(self, a):
        h = self.layer(a)
        return torch.tanh(h)
m_3 = Mod2()

def program(x, img):
    r7 = m_3(x)
    g_log.insert(0, x[-1])
    x[torch.tensor([0, 2])] = r7.amin(0).to(x.dtype)
    v11 = float(img.unsqueeze(-1).amax())
    g_log[0].abs_()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
