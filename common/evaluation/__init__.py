"""Utility of a release (CE, discernibility) and the paper's experiments."""
