"""framejit fuzz repro: run seed 0, program 120 (program seed 120), minimised.

Outcome: mismatch (return.requires_grad)
call 2 (N=5, float32): return tensor: eager requires_grad=False, compiled requires_grad=True

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager` when
TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
import framejit
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_w = torch.randn(8, 8)

@framejit.disable
def opaque1(t):
    return t * 2 + 1

def program(x):
    r6 = opaque1(g_w.unsqueeze(0))
    t7 = torch.cat([r6, r6], dim=2)[..., 1:3][:, None]
    r6[..., :2] = x.sum()
    t9 = t7
    return t9


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
