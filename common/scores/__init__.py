"""Utility scores of a specialization (InfoGain, discernibility) and numeric split search."""
