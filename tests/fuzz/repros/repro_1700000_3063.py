"""framejit fuzz repro: run seed 1700000, program 3063 (program seed 1703063), minimised.

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
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = True
g_log = []

def make0(c):

    def fn(t):
        return t * c + 1
    return fn

def program(x, y):
    with torch.set_grad_enabled(False):
        dd2 = {'a': x.cos(), 'b': x.cos() * 2}
    r3 = make0(2.0)(torch.cat([x, y], dim=1))
    g_log.append(y.logsumexp(0))
    g_log.extend([g_log[0].neg(), g_log[0].neg()])
    return r3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
