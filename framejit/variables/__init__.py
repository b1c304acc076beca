"""The values the symbolic interpreter pushes, one file per kind, and the builder that wraps real values."""
