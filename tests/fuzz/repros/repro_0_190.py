"""framejit fuzz repro: run seed 0, program 190 (program seed 190), minimised.

Outcome: compiled_raised (call:IndexError)
call 0 (N=3, float32): eager returned; compiled raised IndexError: list index out of range
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
import framejit
INPUTS = [('list', 2, ('N', 4))]
TRAIN = True

@framejit.disable
def opaque0(t):
    pass

def program(xs):
    u4 = xs.pop()
    r6 = opaque0(u4)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
