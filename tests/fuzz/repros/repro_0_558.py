"""framejit fuzz repro: run seed 0, program 558 (program seed 558), minimised.

Outcome: mismatch (globals.keys)
call 0 (N=3, float32): globals ['m_2']: eager keys ["'training'", "'last'"], compiled ["'training'"]
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', ('N', 6))]
TRAIN = False

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.ReLU(), torch.nn.Linear(3, 6))

    def forward(self, a):
        h = self.layer(a)
        self.last = h.detach()
m_2 = Mod1()

def program(x, y):
    t3 = y.long()
    t4 = y / 3
    r6 = m_2(torch.stack([x, t4]))
    t3.mul_(t3[0])
    raise ValueError(f'bad value 9')


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
