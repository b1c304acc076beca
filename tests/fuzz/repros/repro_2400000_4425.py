"""framejit fuzz repro: run seed 2400000, program 4425 (program seed 2404425), minimised.

Outcome: compiled_raised (call:IndexError)
call 0 (N=3, float32): eager raised RuntimeError: A view was created in no_grad mode and its base or another
    view of its base has been modified inplace with grad mode enabled. This view is the output of a function
    that returns multiple views. Such functions do not allow the output views to be modified inplace. You
    should replace the inplace operation by an out-of-place one.; compiled raised IndexError: pop from empty
    list

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,))]
TRAIN = True
g_w = torch.randn(6, 6)

def program(x, y):
    for e1 in g_w:
        v2 = e1.unsqueeze(0).sum().item()
        g_w[..., :2] = y.sum(0, keepdim=True)
    t8 = x.reshape(-1)
    lst9 = [t8.min(), t8 @ t8]
    p11, *rest13 = lst9
    for i14 in range(3):
        u16 = rest13.pop()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
