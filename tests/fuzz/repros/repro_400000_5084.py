"""framejit fuzz repro: run seed 400000, program 5084 (program seed 405084), minimised.

Outcome: mismatch (globals.requires_grad)
call 0 (N=3, float32): globals ['g_t']: eager requires_grad=True, compiled requires_grad=False

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', (4,))]
TRAIN = True
g_t = torch.randn(4)

def program(y):
    global g_t
    t3 = g_t.to(torch.float32)
    t4 = y.abs().sqrt()
    t3.sub_(t4)
    g_t = torch.zeros(4) + g_t
    return t4


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
