"""framejit fuzz repro: run seed 1400000, program 7278 (program seed 1407278), minimised.

Outcome: mismatch (call.exception_message)
call 0 (N=3, float32): RuntimeError message: eager 'Output 0 of Unbind is a view and is being modified
    inplace. This view is the output of a function that returns multiple views. Such functions do not allow
    the output views to be modified inplace. You should replace the inplace operation by an out-of-place
    one.', compiled 'Output 0 of AsStrided is a view and is being modified inplace. This view was created
    inside a custom Function (or because an input was returned as-is) and the autograd logic to handle
    view+inplace would override the custom backward associated with the custom Function, leading to incorrect
    gradients. This behavior is forbidden. You can fix this by cloning the output of the custom Function.'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4)), ('tensor', (4,)), ('dict', ('a', 'b'), ('N', 4))]
TRAIN = True

class Mod5(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, a):
        h = self.layer(a.reshape(a.shape[0], 2, 2, 1))
        return torch.tanh(h)
m_6 = Mod5()

def program(x, y, d):
    v7 = torch.stack([d['a'], x]).sum().item()
    r8 = m_6(d['b'].sub(y))
    t9 = r8.sub(y).flatten(1)
    t10 = y.view(*y.shape[:-1], 2, 2).cumsum(-1).sum(-2, keepdim=True)
    for e12 in t10:
        if d['b'].t().sum() > 0:
            pass
        e12[e12 > 1] = v7
    return [t10, t9]


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
