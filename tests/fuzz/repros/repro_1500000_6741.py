"""framejit fuzz repro: run seed 1500000, program 6741 (program seed 1506741), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: dictionary changed size during iteration; compiled did not
    raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = False
g_d = {}

def helper0(a, *, scale=2.0):
    g_d.pop('a', None)
    return a * scale

def program(x, y):
    t4 = x / y
    r7 = helper0(t4 / x, scale=-1.5)
    g_d.update({'a': r7[0]})
    for i10, e11 in g_d.items():
        r13 = helper0(r7 / 3, scale=0.25)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
