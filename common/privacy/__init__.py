"""Privacy models: LKC-privacy (and the Protocol every model implements)."""
