"""framejit fuzz repro: run seed 6500700, program 39 (program seed 6500739), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 2 (N=5, float16): eager raised NameError: name 'helper0' is not defined; compiled raised
    BackendCompilerFailed: backend 'inductor' raised InductorError: CppCompileError: C++ compile error

    (the C++ error: `at_Half_tmp_acc0_vec` declared twice, one reduction's float16 conversion)

`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,
dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)
and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = False
CALLS = [{'n': 3, 'dtype': 'float32', 'seed': 1}, {'reuse': True}, {'n': 5, 'dtype': 'float16', 'seed': 2, 'bump': 1}]
COMPILE = {'backend': 'eager'}

def program(y):
    dd8 = {'a': y.amax(-2, keepdim=True), 'b': y.amax(-2, keepdim=True) * 2}
    r9 = helper0(t5, x)
    u10 = dd8['b']


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__, backend='inductor')
