"""The symbolic interpreter: the translator, its opcode handlers, closure cells and the capture policy by file."""
