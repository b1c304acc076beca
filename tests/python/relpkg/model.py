"""Functions that import inside their bodies: `from . import m`, `from .m import f`, `import a.b as c`."""


def relative_module(x):
    from . import helpers

    return helpers.double(x) + helpers.SCALE


def relative_names(x):
    from .helpers import SCALE, shift

    return shift(x) * SCALE


def dotted_alias(x):
    import tests.python.relpkg.helpers as h
    import torch.nn.functional as F

    return F.relu(h.double(x))
