"""framejit fuzz repro: run seed 5000000, program 42 (not minimised).

Outcome at 011a2c0: mismatch (backward.exception_missing)
call 2 (N=5, float32, y a view of x, xs[1] sliced_rows): eager raised RuntimeError: one of the variables needed
    for gradient computation has been modified by an inplace operation; compiled (aot_eager, dynamic=True) did not.
    The graph's check of a saved input had been left to AOTAutograd's node, whose unpack did not make it.

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch

INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4)), ('int', 2), ('list', 2, ('N', 4))]
TRAIN = True
CALLS = [
    {'n': 3, 'dtype': 'float32', 'seed': 1},
    {'reuse': True},
    {'n': 5, 'dtype': 'float32', 'seed': 2, 'bump': 1, 'layouts': {'y': ('view', 'x'), 'xs[1]': 'sliced_rows'}},
    {'n': 3, 'dtype': 'float32', 'seed': 3, 'layouts': {'x': 'expanded', 'y': 'transposed', 'xs[0]': 'transposed', 'xs[1]': 'offset'}},
]
COMPILE = {'backend': 'aot_eager', 'dynamic': True}

torch.manual_seed(951)
g_count = 0

def helper0(a, b, scale=2.0):
    a.t().mul_(0.5)
    b = torch.mul(a, b)
    a.sigmoid_()
    print("step")
    return b.abs() * scale

def helper1(a, *, scale=2.0):
    lst2 = [a.cumsum(-1), a]
    return torch.add(a, a, alpha=2) * scale

def make3(c):
    def fn(t):
        return t * c + 1
    return fn

def program(x, y, k, xs):
    global g_count
    lst4 = [(y + x), torch.mul(x, x)]
    if torch.softmax(y, dim=-1).abs().sum() > 2:
        t5 = torch.where((y > 0), y, xs[0]).logsumexp(-2)
        v6 = int(x.prod(0, keepdim=True).argmax())
    t7 = (x.abs() * torch.mul(x, xs[0]))
    v8 = y.sum().item()
    lst4[0].clamp_(-1, 1)
    g_count = g_count + 1
    g_count = g_count + 1
    t9 = (t7 + t7)
    if g_count > 2:
        t10 = torch.max(xs[0], dim=-2).values
        t9 = torch.flip(t7, [0]) + t9
        t7[:, 0] = torch.tensor(2.0)
    elif t9.max() > 1:
        xs[0].exp_()
    else:
        t11 = y
        r12 = helper1(t11, scale=-1.5)
    lst4[0].add_(xs[0].cos(), alpha=2)
    t9 = y
    t9 *= (x - int(t7.is_contiguous()))
    j13 = 0
    while j13 < 4:
        j13 += 1
        for e15 in (y.matmul(y.transpose(0, 1)), y.matmul(y.transpose(0, 1))):
            r16 = helper1(t9, scale=0.5)
            t17 = torch.cat([x.logsumexp(0), torch.arange(4)], dim=0).sub(torch.square(xs[0].amax()))
            v18 = xs[0].sum().item()
            r19 = helper1((t7 + 1.5))
    return {'t9': t9, 't7': t7}


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
