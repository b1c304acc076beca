"""framejit fuzz repro: run seed 3200000, program 9625 (program seed 3209625), minimised.

Outcome: mismatch (call.exception_message)
call 0 (N=3, float32): RuntimeError message: eager 'A view was created in no_grad mode and is being modified
    inplace with grad mode enabled. This view is the output of a function that returns multiple views. Such
    functions do not allow the output views to be modified inplace. You should replace the inplace operation
    by an out-of-place one.', compiled 'unsupported operation: some elements of the input tensor and the
    written-to tensor refer to a single memory location. Please clone() the tensor before performing the
    operation.'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('box', ('N', 6), 1)]
TRAIN = True

class Box:

    def __init__(self, t, n):
        self.t = t
g_w = torch.randn(6, 6)

def program(obj):
    for e5 in g_w:
        g_t = e5.to(torch.float32)
    g_t[g_t > 1] = obj.t.max()
    g_t.add_(g_t[-1])


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
