"""framejit fuzz repro: run seed 0, program 10 (program seed 10), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['y']: eager NoneType None, compiled a tensor
torch.compile on the same program: mismatch grads.type

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,))]
TRAIN = True

def program(x, y):
    y.div_(2)
    t7 = torch.nn.functional.relu(x)
    return t7


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
