"""framejit fuzz repro: run seed 6500700, program 65 (program seed 6500765), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 0 (N=3, float32, x sliced_rows): eager returned; compiled raised BackendCompilerFailed: backend
    'inductor' raised InductorError: KeyError: 'buf15'
torch.compile on the same program: mismatch return.identity

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', ('N', 8)), ('tensor', ('N', 8))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1, 'layouts': {'x': 'sliced_rows'}}]
COMPILE = {'backend': 'eager'}
g_t = torch.randn(8)

def program(x, y, z):
    t9 = torch.minimum(torch.cat([x, y], dim=1), z.max())
    t10 = torch.cat([g_t + x, z], dim=1)
    t11 = x
    t12 = torch.cat([t10.sub(t9), t9.cumsum(-1)], dim=1) * 2
    t12 -= x.mean(1, keepdim=True)
    z *= t11
    t11.t().mul_(0.5)
    return t12


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='inductor')
