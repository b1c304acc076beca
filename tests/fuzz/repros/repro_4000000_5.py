"""framejit fuzz repro: run seed 4000000, program 5 (program seed 4000005), minimised.

Outcome: mismatch (return.value)
call 2 (N=5, float32, y last row of x): return tensor: values differ (Mismatched elements: 20 / 40 (50.0%);
    Greatest absolute difference: 84.56353759765625 at index (4, 7) (up to 1e-05 allowed)); eager
    [-9.5761137008667, 1.00246000289917, 2.090451240539551, 1.1619428396224976, 1.6100964546203613,
    -1.8354662656784058]..., compiled [-9.576114654541016, 1.00246000289917, 2.090451240539551,
    1.1619428396224976, 1.2761811017990112, -1.8715020418167114]...
torch.compile on the same program: mismatch return.value

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}, {'reuse': True}, {'n': 5, 'dtype': 'float32', 'seed': 2, 'bump': 1, 'layouts': {'y': ('row', 'x')}}]
COMPILE = {'backend': 'inductor'}

class Box:
    pass

def program(x, y):
    y[-1] = y @ y
    x[-1] = torch.flip(y, [0])
    t8 = torch.mul(x, y)
    return t8


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
