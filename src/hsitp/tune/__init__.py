"""Hyper-parameter tuning with an equal budget per plan (issue 36): the search space, the study runner and the
budget curves (expected best validation OA against trials)."""
