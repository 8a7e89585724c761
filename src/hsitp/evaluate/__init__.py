"""Accuracy you can trust: classification metrics on test pixels (``metrics``) and a classical baseline on the
same train/test partition (``baseline``). No torch: metrics are numpy, the baseline scikit-learn."""
