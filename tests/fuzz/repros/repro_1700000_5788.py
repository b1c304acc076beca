"""framejit fuzz repro: run seed 1700000, program 5788 (program seed 1705788), minimised.

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
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
g_t = torch.randn(4)

def program(x):
    global g_t
    x = torch.add(x, g_t, alpha=2)
    t8 = torch.where(x < x, x, x)
    print(x.requires_grad)
    g_t += x.norm()
    return t8


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
