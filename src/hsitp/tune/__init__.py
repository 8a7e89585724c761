"""Hyper-parameter tuning with an equal budget per plan (no plan wins by a larger search): the search space,
the study runner and the budget curves (expected best validation OA against trials)."""
