"""framejit fuzz repro: run seed 2700000, program 7947 (program seed 2707947), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: unsupported operation: more than one element of the written-
    to tensor refers to a single memory location. Please clone() the tensor before performing the operation.;
    compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,))]
TRAIN = True

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 2, 1))
        return torch.tanh(h)
m_2 = Mod1()

def program(x, y):
    t4 = y.amin(-1, keepdim=True).expand(2, *y.amin(-1, keepdim=True).shape[1:])
    r5 = m_2(x)
    t4.add_(torch.flip(t4, [0]), alpha=2)
    r8 = m_2(r5 + r5)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
