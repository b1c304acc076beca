"""framejit fuzz repro: run seed 200000, program 6856 (program seed 206856), minimised.

Outcome: compiled_raised (call:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: Output 0 of AsStrided is a view and is
    being modified inplace. This view was created inside a custom Function (or because an input was returned
    as-is) and the autograd logic to handle view+inplace would override the custom backward associated with
    the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by
    cloning the output of the custom Function.

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_d = {}

def program(y):
    t10 = torch.add(y, y, alpha=2)
    t10.view(-1).add_(1)
    print(len(g_d))
    t10 += torch.full((8,), 0.5)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
