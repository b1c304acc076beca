"""framejit fuzz repro: run seed 1600000, program 7275 (program seed 1607275), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['x']: eager a tensor, compiled NoneType None

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True

def program(x, y):
    t5 = torch.cat([torch.cat([x, y], dim=0), torch.cat([x, y], dim=0)], dim=1).T
    if (t5 > 0).any():
        t5[torch.tensor([0, 2])] = y.sum().to(t5.dtype)
    return t5


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
