"""framejit fuzz repro: run seed 1100000, program 2000 (program seed 1102000), minimised.

Outcome: mismatch (grads.type)
call 2 (N=5, float32): grads ['xs[0]']: eager NoneType None, compiled a tensor

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,)), ('list', 2, ('N', 8))]
TRAIN = True

def combine0(*ts, scale=1.0, **kw):
    pass

def program(x, y, xs):
    t1 = xs[0][None]
    t2 = torch.where(x.sub(y) < torch.sum(x), x.sub(y), torch.sum(x)) ** 2
    try:
        p8, p9 = (torch.cat([xs[0], t2], dim=0), y.abs().sqrt())
        if bool(p8.min() < 0):
            pass
        r10 = combine0(p8, -y)
    except (KeyError, IndexError) as err11:
        t12 = torch.maximum(y / t1, t1.cumsum(-1)).std()
    x *= torch.flip(t2, [0])
    return x


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
