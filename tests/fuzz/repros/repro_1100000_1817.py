"""framejit fuzz repro: run seed 1100000, program 1817 (program seed 1101817), minimised.

Outcome: mismatch (backward.exception_message)
call 2 (N=5, float32): RuntimeError message: eager 'Trying to backward through the graph a second time (or
    directly access saved tensors after they have already been freed). Saved intermediate values of the graph
    are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward
    through the graph a second time or if you need to access saved tensors after calling backward.', compiled
    'one of the variables needed for gradient computation has been modified by an inplace operation:
    [torch.FloatTensor [6, 5, 1]] is at version 1; expected version 0 instead'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('box', ('N', 6), 1)]
TRAIN = True

class Box:

    def __init__(self, t, n):
        self.t = t
g_w = torch.randn(6, 6)

def helper0(a, b, scale=2.0):
    v1 = torch.where(g_w < g_w, g_w, g_w).sum().item()
    return b * scale

def program(x, obj):
    global g_w
    t10 = g_w
    t10 += torch.sum(x)
    r11 = helper0(torch.minimum(x, x), **{'b': obj.t - 0.25, 'scale': 0.5})
    t12 = (g_w[:, None] * torch.log1p(r11.abs())).amax(2, keepdim=True)
    p13, p14 = (x.tanh().cumprod(0), t12 < 0)
    t15 = p14
    dd16 = {'a': t12.bool()}
    r20 = helper0(r11, x)
    dd16.setdefault('b', t15)
    t27 = torch.nn.functional.normalize(dd16['b'][:, 1].float(), dim=-1)
    t12.sigmoid_()
    g_w = (g_w + t27 * g_w).to(g_w.dtype)
    x.sub_(p13 @ g_w.to(p13.dtype))
    return x


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
