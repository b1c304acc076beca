"""framejit fuzz repro: run seed 2000000, program 8655 (program seed 2008655), minimised.

Outcome: mismatch (globals.value)
call 1 (same argument objects again): globals ['m_4']['calls']: eager 10, compiled 8

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('dict', ('a', 'b'), ('N', 6))]
TRAIN = True

class Box:
    pass

def make2(c):

    def fn(t):
        return t * c + 1
    return fn

class Mod3(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a):
        self.calls += 1
m_4 = Mod3()

def program(x, d):
    r11 = make2(-1.5)(d['b'])
    try:
        raise ValueError(f'bad value 3')
    except Exception as err13:
        r14 = m_4(torch.mm(r11.t(), r11))
    j16 = 0
    while j16 < 4:
        j16 += 1
        v17 = x.abs().sqrt().sum().item()
        r18 = m_4(x / 3)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
