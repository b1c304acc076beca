"""framejit fuzz repro: run seed 2400000, program 8269 (program seed 2408269), minimised.

Outcome: mismatch (backward.exception_message)
call 1 (same argument objects again): RuntimeError message: eager 'Trying to backward through the graph a
    second time (or directly access saved tensors after they have already been freed). Saved intermediate
    values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if
    you need to backward through the graph a second time or if you need to access saved tensors after calling
    backward.', compiled "one of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [6]], graph output 1, is at version 2; expected version 1 instead (framejit
    checks the tensors eager's ops saved for backward)"

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_log = []

def program(x):
    t6 = x.roll(1, 0)
    g_log.extend([t6.amin(0), t6.amin(0)])
    g_log[0].exp_()
    t9 = torch.minimum(torch.exp(g_log[0].clamp(max=3))[-1], torch.minimum(x, t6) / torch.where(g_log[0] > 0, g_log[0], g_log[0]))
    p10, p11 = (t9.amax(0, keepdim=True), g_log[0][1:])
    return p11


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
