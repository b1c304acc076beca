"""framejit fuzz repro: run seed 6400000, program 8445 (program seed 6408445), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: A view was created in no_grad mode and is being modified
    inplace with grad mode enabled. This view is the output of a function that returns multiple views. Such
    functions do not allow the output views to be modified inplace. You should replace the inplace operation
    by an out-of-place one.; compiled did not raise
torch.compile on the same program: mismatch call.exception_message

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 2, 3, 8))]
TRAIN = True
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}]
COMPILE = {'backend': 'aot_eager', 'dynamic': True}

class Box:
    pass
g_w = torch.randn(8, 8)
g_d = {}

def program(x, img):
    u4 = g_d.get('b', x.new_ones(8))

    def inner5(a):
        return a.to(torch.float32)
    r12 = inner5(img)
    v13 = int(r12.permute(0, 2, 3, 1).argmax())
    for e16 in g_w:
        if bool(u4.reshape(*u4.shape[:-1], 2, 4).min() < 0):
            pass
        e16[e16 > 1] = img.min()


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='aot_eager')
