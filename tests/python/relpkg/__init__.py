"""A tiny package whose functions import their neighbours inside their bodies (relative and dotted imports)."""
