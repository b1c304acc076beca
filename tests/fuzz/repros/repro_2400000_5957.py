"""framejit fuzz repro: run seed 2400000, program 5957 (program seed 2405957), minimised.

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
INPUTS = [('tensor', (8,))]
TRAIN = True
g_t = torch.randn(8)
g_log = []

def helper0(a, scale=2.0):
    a -= g_t @ g_t
    g_log.extend([a.reshape(-1), a.reshape(-1)])
    return g_log[0].logsumexp(0, keepdim=True) * scale

def program(y):
    r14 = helper0(y + 1.5, scale=-1.5)
    return r14


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
