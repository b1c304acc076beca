"""framejit fuzz repro: run seed 1700000, program 8178 (program seed 1708178), minimised.

Outcome: mismatch (return.identity)
call 0 (N=3, float32): return [3]['a']: eager is an earlier output, compiled is a new tensor

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_t = torch.randn(6)
g_w = torch.randn(6, 6)

def program(y):
    dd0 = {'a': g_w.view(-1), 'b': g_w.view(-1) * 2}
    t2 = (y @ y.t()).masked_fill(y @ y.t() < 0, 0)
    t3 = dd0['a']
    t3 -= 0.25
    return (t3, t2, g_t, dd0)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
