"""framejit fuzz repro: run seed 2400000, program 631 (program seed 2400631), minimised.

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
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True
g_t = torch.randn(4)

def program(x, y):
    global g_t
    g_t = (g_t + g_t).to(g_t.dtype)
    t1 = torch.cat([x, y], dim=0)
    t1.sub_(g_t)
    g_t[..., :2] = t1.std()
    return t1


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
