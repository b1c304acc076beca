"""framejit fuzz repro: run seed 2200000, program 3083 (program seed 2203083), minimised.

Outcome: mismatch (stdout)
call 0 (N=3, float32): stdout: eager 'caught RuntimeError Output 0 of Unbind is a view and is being modified
    inplace. This view is the output of a function that returns multiple views. Such functions do not allow
    the output views to be modified inplace. You should replace the inplace operation by an out-of-place
    one.\n', compiled 'caught RuntimeError Output 0 of AsStrided is a view and is being modified inplace. This
    view is the output of a function that returns multiple views. Such functions do not allow the output views
    to be modified inplace. You should replace the inplace operation by an out-of-place one.\n'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

def program(x):
    try:
        for e4 in x:
            e4[torch.tensor([0, 2])] = e4[e4 > 0].sum().to(e4.dtype)
    except Exception as err7:
        print('caught', type(err7).__name__, err7)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
