"""framejit fuzz repro: run seed 2900000, program 468 (program seed 2900468), minimised.

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
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,))]
TRAIN = True
g_w = torch.randn(4, 4)

def program(x, y):
    global g_w
    v6 = y.sum().item()
    p9, p10 = (torch.mm(x.t(), x), torch.mul(y, y))
    for i11 in range(min(len(p10), 4)):
        g_w = (g_w + (p10 - p9)).to(g_w.dtype)
        p9.mul_(v6)
    return p9


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
