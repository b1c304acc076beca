"""framejit fuzz repro: run seed 300000, program 445 (program seed 300445), minimised.

Outcome: compiled_raised (call:BackendCompilerFailed)
call 2 (N=5, float32): eager returned; compiled raised BackendCompilerFailed: backend 'aot_eager' raised
    RuntimeError: s48 (<class 'torch.SymInt'>, 139779173885200)is not tracked with proxy for
    <torch.fx.experimental.proxy_tensor.PythonKeyTracer object at 0x7f20df508c90>

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
import framejit
INPUTS = [('tensor', ('N', 4))]
TRAIN = True
torch.manual_seed(593)
g_w = torch.randn(4, 4)

@framejit.disable
def opaque4(t):
    pass

def program(x):
    t5 = x
    t6 = t5.unsqueeze(0)
    with torch.no_grad():
        if g_w[[1, 0]].max() > 1:
            t6.zero_()
            r10 = opaque4(x[-1])


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
