"""framejit fuzz repro: run seed 0, program 570 (program seed 570), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 1 (same argument objects again): eager returned; compiled raised RuntimeError: Trying to backward through
    the graph a second time (or directly access saved tensors after they have already been freed). Saved
    intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify
    retain_graph=True if you need to backward through the graph a second time or if you need to access saved
    tensors after calling backward.
torch.compile on the same program: compiled_raised backward:RuntimeError

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
g_w = torch.randn(4, 4)

def program(x):
    global g_count, g_w
    lst3 = [torch.where(x > 0, x, x), x]
    t4 = torch.flip(lst3[0].logsumexp(1), [0]).unsqueeze(-1)
    t10 = t4.amax(-1)[torch.tensor([0, 2])] ** 2
    g_w -= x.sum(0)
    return t10


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
