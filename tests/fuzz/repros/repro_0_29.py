"""framejit fuzz repro: run seed 0, program 29 (program seed 29), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 0 (N=3, float32): eager returned; compiled raised BackendCompilerFailed: backend 'aot_eager' raised
    RuntimeError: one of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [8]], which is output 0 of Select, is at version 1; expected version 0
    instead. Hint: the backtrace further above shows the operation that failed to compute its gradient. The
    variable in question was changed in there or anywhere later. Good luck!
torch.compile on the same program: compiled_raised call:BackendCompilerFailed

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True

def program(x):
    t3 = x[0]
    y = x
    y[-1] = torch.maximum(t3, t3)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
