"""The claim-by-claim audit of the paper (``claims.yaml`` + :mod:`.claims`) and the drift check of a run against
the committed reference tables (:mod:`.audit`). Reads cached results only; never recomputes a stage."""
