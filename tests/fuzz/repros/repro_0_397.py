"""framejit fuzz repro: run seed 0, program 397 (program seed 397), minimised.

Outcome: mismatch (call.exception_missing)
call 0 (N=3, float32): eager raised RuntimeError: unsupported operation: some elements of the input
    tensor and the written-to tensor refer to a single memory location. Please clone() the tensor
    before performing the operation.; compiled did not raise

`python <this file>` runs it eagerly and compiled by framejit (backend `eager`, or `aot_eager` when
TRAIN is set, with a gradient check) and fails while they disagree.
"""
import torch
INPUTS = [('tensor', ('N', 4))]
TRAIN = True

def program(y):
    y -= y[0]


if __name__ == "__main__":
    from framejit.fuzz.runner import check_repro
    check_repro(__file__)
