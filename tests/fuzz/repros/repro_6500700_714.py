"""framejit fuzz repro: run seed 6500700, program 714 (program seed 6501414), minimised.

Outcome: mismatch (arguments.value)
call 2 (N=5, float32, y last row of x): arguments [0]: values differ (Mismatched elements: 7 / 40 (17.5%);
    Greatest absolute difference: 1.4001941680908203 at index (4, 3) (up to 4e-05 allowed)); eager
    [-0.37217962741851807, 2.7569656372070312, -1.532644510269165, -1.7164583206176758, 0.6707273721694946,
    1.1301687955856323]..., compiled [-0.37217962741851807, 2.7569656372070312, -1.532644510269165,
    -1.7164583206176758, 0.6707273721694946, 1.1301687955856323]...

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}, {'reuse': True}, {'n': 5, 'dtype': 'float32', 'seed': 2, 'bump': 1, 'layouts': {'y': ('row', 'x')}}]
COMPILE = {'backend': 'eager'}
g_t = torch.randn(8)

def program(x, y):
    y -= g_t
    x -= y.roll(1, 0)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='inductor')
