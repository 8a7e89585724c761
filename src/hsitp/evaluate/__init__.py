"""Accuracy you can trust: classification metrics on test pixels (``metrics``) and verdicts with confidence intervals
(``verdict``). Numpy only, no torch."""
