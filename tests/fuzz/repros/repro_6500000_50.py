"""framejit fuzz repro: run seed 6500000, program 50 (program seed 6500050), minimised.

Outcome: mismatch (return.value)
call 0 (N=3, float32, xs[0] transposed): return value: eager 10, compiled 5

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6)), ('list', 2, ('N', 6))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1, 'layouts': {'xs[0]': 'transposed'}}]
COMPILE = {'backend': 'eager'}

def program(x, xs):
    t7 = x
    x = torch.where(xs[0] > 0, xs[0], t7) + x
    v14 = int((x * x).argmax())
    return v14


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='inductor')
