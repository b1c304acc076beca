"""framejit fuzz repro: run seed 100000, program 6226 (program seed 106226), minimised.

Outcome: mismatch (globals.value)
call 0 (N=3, float32): globals ['g_log'][0]: values differ (Mismatched elements: 8 / 8 (100.0%); Greatest
    absolute difference: 4.385429382324219 at index (0,) (up to 1e-05 allowed)); eager [3.586989402770996,
    -1.8312901258468628, 1.5987002849578857, -1.277006983757019, 0.32550153136253357, -0.4791449308395386]...,
    compiled [-0.7984398007392883, 0.33573052287101746, 0.2753335237503052, 1.7163026332855225,
    -0.056139666587114334, 0.9107019901275635]...

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 8)), ('tensor', (8,))]
TRAIN = False
g_log = []

def program(x, z):
    g_log.append(z)
    z = x[-1]
    if torch.maximum(x, x).abs().sum() > 2:
        pass
    else:

        def inner12(a):
            z.add_(0.5, alpha=2)


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
