"""framejit fuzz repro: run seed 0, program 880 (program seed 880), minimised.

Outcome: compiled_raised (backward:RuntimeError)
call 0 (N=3, float32): eager returned; compiled raised RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [torch.FloatTensor [3, 4]], which is output 0 of
    torch::autograd::CopyBackwards, is at version 1; expected version 0 instead. Hint: enable anomaly
    detection to find the operation that failed to compute its gradient, with
    torch.autograd.set_detect_anomaly(True, check_nan=False).
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('list', 2, ('N', 4))]
TRAIN = True

def program(x, xs):
    t4 = x
    t5 = x * (t4 + xs[0]).to(torch.int64)
    x *= t5.abs()
    t8 = t4 * t5
    for e11 in (t8, torch.add(xs[0], t8, alpha=2)):
        vals15 = torch.exp(xs[0].clamp(max=3)).reshape(-1).tolist()
    return x


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
