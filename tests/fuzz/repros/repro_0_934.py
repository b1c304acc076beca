"""framejit fuzz repro: run seed 0, program 934 (program seed 934), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: Trying to backward through
    the graph a second time (or directly access saved tensors after they have already been freed). Saved
    intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify
    retain_graph=True if you need to backward through the graph a second time or if you need to access saved
    tensors after calling backward.
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_log = []

def program(x):
    try:
        t4 = x
        print(len(g_log))
        x = t4 + x
    except (ValueError, KeyError) as err5:
        pass
    g_log.insert(0, x[0])
    return g_log


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
