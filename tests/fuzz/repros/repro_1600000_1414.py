"""framejit fuzz repro: run seed 1600000, program 1414 (program seed 1601414), minimised.

Outcome: mismatch (call.exception_message)
call 0 (N=3, float32): RuntimeError message: eager 'A view was created in no_grad mode and its base or another
    view of its base has been modified inplace with grad mode enabled. This view is the output of a function
    that returns multiple views. Such functions do not allow the output views to be modified inplace. You
    should replace the inplace operation by an out-of-place one.', compiled 'Output 1 of Unbind is a view and
    its base or another view of its base has been modified inplace. This view is the output of a function that
    returns multiple views. Such functions do not allow the output views to be modified inplace. You should
    replace the inplace operation by an out-of-place one.'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('tensor', (6,))]
TRAIN = True
g_t = torch.randn(6)

def program(x, y):
    global g_t
    lst2 = [y.unsqueeze(0), y.unsqueeze(0)]
    t3 = g_t
    for i6, e7 in enumerate(list(lst2)):
        for e9 in t3:
            x[:, 0] = e9.sum()
            g_t += e7[0]


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
