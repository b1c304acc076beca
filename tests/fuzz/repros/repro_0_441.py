"""framejit fuzz repro: run seed 0, program 441 (program seed 441), minimised.

Outcome: mismatch (globals.value)
call 3 (N=3, float64): globals ['m_3']['calls']: eager 4, compiled 3
torch.compile on the same program: mismatch globals.value

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = False

class Mod2(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.LayerNorm(4)
        self.calls = 0

    def forward(self, a):
        self.calls += 1
        h = self.layer(a)
m_3 = Mod2()

def program(y):
    r4 = m_3(y)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
