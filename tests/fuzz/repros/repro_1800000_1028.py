"""framejit fuzz repro: run seed 1800000, program 1028 (program seed 1801028), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: Trying to backward through
    the graph a second time (or directly access saved tensors after they have already been freed). Saved
    intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify
    retain_graph=True if you need to backward through the graph a second time or if you need to access saved
    tensors after calling backward.

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

def program(x):
    global g_t
    g_t = (g_t + x[0]).to(g_t.dtype)
    t5 = torch.maximum(x, g_t.sub(g_t))
    return t5


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
