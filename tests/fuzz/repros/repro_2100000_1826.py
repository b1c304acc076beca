"""framejit fuzz repro: run seed 2100000, program 1826 (program seed 2101826), minimised.

Outcome: mismatch (backward.exception_message)
call 1 (same argument objects again): RuntimeError message: eager 'Trying to backward through the graph a
    second time (or directly access saved tensors after they have already been freed). Saved intermediate
    values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if
    you need to backward through the graph a second time or if you need to access saved tensors after calling
    backward.', compiled "one of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [8]], graph input 1, is at version 2; expected version 1 instead (framejit
    checks the tensors eager's ops saved for backward)"

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)
g_log = []

def helper2(a, b, scale=2.0):
    p3, p4 = (g_t.mean(), b)
    return p4.logsumexp(0) * scale

def program(x):
    global g_t
    g_t *= torch.where(g_t > 0, g_t, g_t)
    r11 = helper2(x, torch.mul(x, g_t), scale=0.25)
    print(len(g_log))
    g_log.append(torch.mul(r11, g_t))
    return g_log


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
