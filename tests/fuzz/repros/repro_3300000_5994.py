"""framejit fuzz repro: run seed 3300000, program 5994 (program seed 3305994), minimised.

Outcome: mismatch (backward.exception_message)
call 1 (same argument objects again): RuntimeError message: eager 'Trying to backward through the graph a
    second time (or directly access saved tensors after they have already been freed). Saved intermediate
    values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if
    you need to backward through the graph a second time or if you need to access saved tensors after calling
    backward.', compiled "one of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [8]], graph output 1, is at version 1; expected version 0 instead (framejit
    checks the tensors eager's ops saved for backward)"

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_log = []

def program(x):
    t14 = torch.softmax(x, dim=-1)
    g_log.insert(0, t14.mean(0))
    for e20 in list(g_log):
        e20.exp_()
    return (t14, g_log)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
