"""framejit fuzz repro: run seed 0, program 296 (program seed 296), minimised.

framejit internal error, the frame then runs as Python:
framejit internal error on program (program_296.py:26), running it as Python:
    StopIteration:

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree or framejit falls back on an internal error.
"""
import torch
INPUTS = [('dict', ('a', 'b'), ('N', 4))]
TRAIN = False

class Box:
    pass
g_t = torch.randn(4)

def program(d):
    try:
        if d['b'].sum() > 0:
            pass
    except Exception as err5:
        try:
            r6 = helper0(x.masked_fill(x < 0, 0), scale=s)
        finally:
            t7 = torch.maximum((x ** 2)[..., 1:3], torch.minimum(x, x).logsumexp(1, keepdim=True))
    g_t[torch.tensor([0, 2])] = g_t.std().to(g_t.dtype)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, internal_errors=True)
