"""framejit fuzz repro: run seed 1600000, program 5798 (program seed 1605798), minimised.

Outcome: mismatch (return.identity)
call 0 (N=3, float32): return [1]: eager is a new tensor, compiled is an earlier output

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

def program(y):
    t1 = y
    lst2 = [y[-1], t1.amax(0)]
    lst4 = [torch.topk(lst2[0], 2, dim=-1).values, torch.topk(lst2[0], 2, dim=-1).values]
    return lst4


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
