"""Running a program eagerly and compiled, backward included, and comparing results, gradients and errors: the
harness of the tests of saved tensors and of outputs returned as views."""

import torch

import framejit

MODIFIED = "modified by an inplace operation"


def run(fn, make_args, compiled):
    """(result, grads, error of backward or call) of fn on fresh args."""
    args = make_args()
    try:
        out = fn(*args)
        out.sum().backward()
    except RuntimeError as e:
        return None, None, str(e)
    return out.detach(), [a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None for a in args], None


def differential(fn, make_args, backend):
    framejit.reset()
    compiled = framejit.optimize(backend)(fn)
    expected = run(fn, make_args, False)
    got = run(compiled, make_args, True)
    if expected[2] is not None:
        assert got[2] is not None, f"eager raised {expected[2][:80]!r}; compiled did not"
        assert (MODIFIED in expected[2]) == (MODIFIED in got[2]), (expected[2], got[2])
        return got[2]
    assert got[2] is None, got[2]
    torch.testing.assert_close(got[0], expected[0])
    for g, e in zip(got[1], expected[1]):
        if e is None:
            assert g is None
        else:
            torch.testing.assert_close(g, e)
    return None


def leaf(*shape):
    def make():
        torch.manual_seed(0)
        return (torch.randn(*shape, requires_grad=True),)

    return make


def nonleaf(*shape):
    def make():
        torch.manual_seed(0)
        return (torch.randn(*shape, requires_grad=True) * 1,)

    return make
