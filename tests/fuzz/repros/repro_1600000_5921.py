"""framejit fuzz repro: run seed 1600000, program 5921 (program seed 1605921), minimised.

Outcome: compiled_raised (call:NameError)
call 0 (N=3, float32): eager raised UnboundLocalError: cannot access local variable 'r6' where it is not
    associated with a value; compiled raised NameError: cannot access free variable 'r6' where it is not
    associated with a value in enclosing scope

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = []
TRAIN = False

def program():

    def inner7(a):
        r8 = helper0(a + r6)
    try:
        _ = g_d['c']
    except (ValueError, KeyError) as err14:
        pass
    finally:
        del r6


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
