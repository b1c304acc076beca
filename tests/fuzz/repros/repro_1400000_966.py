"""framejit fuzz repro: run seed 1400000, program 966 (program seed 1400966), minimised.

Outcome: mismatch (call.exception_message)
call 0 (N=3, float32): RuntimeError message: eager 'unsupported operation: some elements of the input tensor
    and the written-to tensor refer to a single memory location. Please clone() the tensor before performing
    the operation.', compiled 'Output 0 of CompiledFunction is a view and is being modified inplace. This view
    was created inside a custom Function (or because an input was returned as-is) and the autograd logic to
    handle view+inplace would override the custom backward associated with the custom Function, leading to
    incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom
    Function.'

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or
`aot_eager` when TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

def program(x):
    p5, p6 = (x.exp().log(), torch.max(x, dim=0).values)
    p6.view(-1).add_(1)
    p6.mul_(p6[..., 0])


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
