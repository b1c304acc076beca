"""framejit fuzz repro: run seed 0, program 705 (program seed 705), minimised.

Outcome: mismatch (stdout)
call 0 (N=3, float32): stdout: eager 'max=1.410\nmax=1.410\n', compiled 'max=-0.000\nmax=-0.000\n'
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 6))]
TRAIN = True
g_scale = 1.5

class Mod0(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(6)
        self.register_buffer('total', torch.zeros(()))

    def forward(self, a):
        h = self.layer(a)
        self.total += h.detach().sum()
        return h.relu()
m_1 = Mod0()

def program(x):
    r2 = m_1(x - 0.25)
    t3 = x
    t5 = torch.topk(torch.cat([r2, r2], dim=1), 2, dim=-1).values
    for e7 in (t5.to(torch.float32), t5):
        with torch.set_grad_enabled(bool(x[1:].abs().sum() > 2)):
            pass
        r10 = m_1(t3.clone())
        r2 *= g_scale
        print(f'max={float(e7.max()):.3f}')


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
