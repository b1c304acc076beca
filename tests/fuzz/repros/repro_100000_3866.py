"""framejit fuzz repro: run seed 100000, program 3866 (program seed 103866), minimised.

Outcome: mismatch (stdout)
call 0 (N=3, float32): stdout: eager 'sum -1.022\nsum -1.022\nsum -1.022\n', compiled ''
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', ('N', 4)), ('dict', ('a', 'b'), ('N', 4))]
TRAIN = True

def program(x, y, d):
    x[torch.tensor([0, 2])] = x.sum(0).to(x.dtype)
    t3 = y[..., 0].sub(d['b'].matmul(d['b'].transpose(0, 1)) / 3)
    try:
        t3 += t3[-1]
    finally:
        for i10 in range(3):
            print('sum', round(float(y.sum()), 3))


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
