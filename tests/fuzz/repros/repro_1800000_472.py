"""framejit fuzz repro: run seed 1800000, program 472 (program seed 1800472), minimised.

Outcome: mismatch (globals.value)
call 0 (N=3, float32): globals ['m_5'].state['layer.running_mean']: values differ (Mismatched elements: 8 / 8
    (100.0%); Greatest absolute difference: 0.038309842348098755 at index (6,) (up to 1e-05 allowed)); eager
    [0.05639979615807533, 0.15652960538864136, 0.25605612993240356, 0.13623277842998505, 0.1803751140832901,
    0.10226915776729584]..., compiled [0.038822151720523834, 0.14566907286643982, 0.23924611508846283,
    0.12268204987049103, 0.16223032772541046, 0.08395463228225708]...
torch.compile on the same program: compiled_raised call:BackendCompilerFailed

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('box', ('N', 8), 1)]
TRAIN = True

class Box:

    def __init__(self, t, n):
        self.t = t
g_log = []

def combine3(*ts, scale=1.0, **kw):
    out = ts[0]
    return out * scale

class Mod4(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.BatchNorm1d(8)

    def forward(self, a):
        h = self.layer(a)
        return h
m_5 = Mod4()

def program(y, obj):
    t6 = obj.t.t()
    t9 = torch.clamp(t6, -1, 1)
    r10 = combine3(torch.tanh(t6), torch.mul(t6, t9), t9.sum())
    vals12 = torch.mul(t6, r10).reshape(-1).tolist()
    t16 = t6.cumsum(-1).relu()
    g_log.extend([r10.new_ones(8), r10.new_ones(8)])
    r19 = m_5(y.roll(1, 0))
    r20 = m_5(torch.add(obj.t, g_log[0], alpha=2))
    return [t16, t21, r20, k]


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
