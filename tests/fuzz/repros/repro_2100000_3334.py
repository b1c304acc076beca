"""framejit fuzz repro: run seed 2100000, program 3334 (program seed 2103334), minimised.

Outcome: mismatch (grads.type)
call 0 (N=3, float32): grads ['x']: eager NoneType None, compiled a tensor

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('list', 2, ('N', 6))]
TRAIN = True

def program(x, xs):
    t2 = (xs[0] - xs[0]).logsumexp(-2).masked_fill((xs[0] - xs[0]).logsumexp(-2) < 0, 0)
    t2.add_(t2, alpha=2)
    for e5 in (x.unsqueeze(-1), x.unsqueeze(-1)):
        if (e5 / t2).max() > 1:
            pass
    return t2


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
