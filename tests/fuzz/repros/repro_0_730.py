"""framejit fuzz repro: run seed 0, program 730 (program seed 730), minimised.

Outcome: compiled_raised (call:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: A view was created in no_grad mode and is
    being modified inplace with grad mode enabled. This view was created inside a custom Function (or because
    an input was returned as-is) and the autograd logic to handle view+inplace would override the custom
    backward associated with the custom Function, leading to incorrect gradients. This behavior is forbidden.
    You can fix this by cloning the output of the custom Function.
torch.compile on the same program: compiled_raised call:TorchRuntimeError

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_w = torch.randn(6, 6)

def helper0(a, b, scale=2.0):
    t1 = (g_w ** 2).amin(-2).view(*(g_w ** 2).amin(-2).shape[:-1], 2, 3)
    print('sum', round(float(a.sum()), 3))
    t1[:, 0] = b.mean()

def program(x):
    r7 = helper0(x, **{'b': x, 'scale': 0.5})


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
