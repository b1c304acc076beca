"""framejit fuzz repro: run seed 1000000, program 2930 (program seed 1002930), minimised.

Outcome: compiled_raised (call:InternalError)
call 2 (N=5, float32): eager raised NameError: name 't12' is not defined; compiled raised InternalError:
    internal error while compiling program (/tmp/fz11m/work-hirjazef/candidate_2930_183.py:5): IndexError:
    list index out of range
(set framejit.config.suppress_errors = True to run such frames as Python instead)

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4))]
TRAIN = True

def program(x, y):
    for e6 in x:
        pass
    t9 = x
    t9 = t9 + t9
    lst13 = [t9.prod(-1), y.mean(1)]
    v14 = t12.clamp(min=0).sum().item()
    lst13[0].masked_fill_(lst13[0] > 0, 0)
    return t9


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
