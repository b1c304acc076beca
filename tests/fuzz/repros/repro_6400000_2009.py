"""framejit fuzz repro: run seed 6400000, program 2009 (program seed 6402009), minimised.

Outcome: mismatch (return.value)
call 3 (N=4, float32, x transposed, y a view of x): return tensor: values differ (Mismatched elements: 6 / 8
    (75.0%); Greatest absolute difference: 4.319469451904297 at index (1, 1) (up to 1e-05 allowed)); eager
    [1.9441782236099243, 0.9496318101882935, 0.7506766319274902, 0.736404538154602, 5.055873870849609,
    1.2821030616760254]..., compiled [0.35988152027130127, -0.7820168137550354, 0.7506766319274902,
    5.055873870849609, 0.736404538154602, 1.2821030616760254]...

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}, {'reuse': True}, {'n': 5, 'dtype': 'float32', 'seed': 2, 'bump': 1}, {'n': 4, 'dtype': 'float32', 'seed': 3, 'layouts': {'x': 'transposed', 'y': ('view', 'x')}}]
COMPILE = {'backend': 'eager'}

def program(x, y):
    p3, p4 = (x[..., 1:3], torch.nn.functional.relu(x))
    p3.exp_()
    dd8 = {'a': y * 2, 'b': y * 2 * 2}
    return p3


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='aot_eager')
