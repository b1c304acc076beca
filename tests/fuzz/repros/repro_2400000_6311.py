"""framejit fuzz repro: run seed 2400000, program 6311 (program seed 2406311), minimised.

Outcome: mismatch (globals.requires_grad)
call 0 (N=3, float32): globals ['g_log'][0]: eager requires_grad=True, compiled requires_grad=False

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_t = torch.randn(6)
g_log = []

def program(x):
    p3, p4 = (g_t, x)
    with torch.set_grad_enabled(False):
        g_log.extend([p4[-1], p4[-1]])


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
