"""torch.distributed under framejit: collectives traced into the graph (collectives.py)."""

import torch.distributed

if torch.distributed.is_available():
    from framejit.distributed import collectives  # noqa: F401  (registers the polyfills)
