"""framejit fuzz repro: run seed 1900000, program 123 (program seed 1900123), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: Trying to backward through
    the graph a second time (or directly access saved tensors after they have already been freed). Saved
    intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify
    retain_graph=True if you need to backward through the graph a second time or if you need to access saved
    tensors after calling backward.
torch.compile on the same program: compiled_raised backward:RuntimeError

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', (4,)), ('box', ('N', 4), 1)]
TRAIN = True

class Box:

    def __init__(self, t, n):
        self.t = t
g_w = torch.randn(4, 4)

def program(y, obj):
    global g_w
    g_w = (g_w + y.unsqueeze(0)).to(g_w.dtype)
    with torch.set_grad_enabled(bool(obj.t.matmul(obj.t.transpose(0, 1)).max() > 1)):
        pass
    return g_w


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
