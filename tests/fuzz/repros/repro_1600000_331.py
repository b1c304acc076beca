"""framejit fuzz repro: run seed 1600000, program 331 (program seed 1600331), minimised.

Outcome: mismatch (backward.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: one of the variables needed for gradient computation has
    been modified by an inplace operation: [torch.FloatTensor [3, 1]], which is output 0 of Relu, is at
    version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to
    compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).; compiled did not
    raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,))]
TRAIN = True

def program(x, y):
    t3 = x.cumsum(-1).prod(1, keepdim=True).relu()
    x = x + x
    t4 = t3.roll(1, 0).unsqueeze(-1)
    lst5 = [torch.cat([t3, t3], dim=0), torch.cat([t3, t3], dim=0)]
    try:
        t3 -= t3.detach()
        raise KeyError('8')
    except (KeyError, IndexError) as err7:
        t4.clamp_(-1, 1)
    finally:
        if (lst5[0] * lst5[0]).max() > 1:
            p9, p10 = (lst5[0], y.masked_fill(y < 0, 0))
            p11, p12 = (t3.long(), torch.softmax(p9, dim=-1))
        else:
            t15 = torch.softmax(x.unsqueeze(0).sum(2, keepdim=True), dim=-1)
    return t4


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
