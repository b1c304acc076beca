"""framejit fuzz repro: run seed 1400000, program 7479 (program seed 1407479), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [8]], graph input 4, is at
    version 5; expected version 3 instead (framejit checks the tensors eager's ops saved for backward)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True

class Mod1(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(8)

    def forward(self, a):
        a = a.to(self.layer.weight.dtype)
        h = self.layer(a)
        return h
m_2 = Mod1()

def program(x, y):
    t5 = torch.sort(x, dim=-1).values
    t6 = y.mean(0, keepdim=True)
    t15 = torch.nn.functional.gelu(y).bool()
    r20 = m_2(t15.double())
    vals23 = x.matmul(x.transpose(0, 1)).reshape(-1).tolist()
    r25 = m_2(torch.minimum(t5, t6))
    return r20


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
