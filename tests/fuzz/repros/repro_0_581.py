"""framejit fuzz repro: run seed 0, program 581 (program seed 581), minimised.

Outcome: mismatch (return.value)
call 0 (N=3, float32): return tensor: values differ (Mismatched elements: 8 / 8 (100.0%); Greatest absolute
    difference: 5.466546058654785 at index (7,) (up to 1e-05 allowed)); eager [1.5409960746765137,
    0.2779996991157532, -1.035932183265686, 2.282717227935791, 1.201191782951355, 1.4585474729537964]...,
    compiled [-0.0, 0.031438812613487244, 0.46688348054885864, -0.18271006643772125, 0.4647952616214752,
    0.7492475509643555]...
torch.compile on the same program: ok

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager`
when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8))]
TRAIN = True
g_t = torch.randn(8)

def helper0(a, b, scale=2.0):
    t1 = torch.linspace(0, 1, 8)
    return t1 * scale

def program(x):
    r4 = helper0(*[torch.minimum(g_t, x), torch.square(x)])
    t8 = g_t
    t9 = g_t
    t8 = torch.add(t9, r4, alpha=2)
    r12 = helper0(torch.minimum(x, x), **{'b': torch.exp(x.clamp(max=3)), 'scale': -1.5})
    t9 *= r12 * 0.5
    try:
        x[..., :2] = 0.25
        raise ValueError(f'bad value 1')
    except (ValueError, KeyError) as err16:
        v17 = int(t9.argmax())
    return t8


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
