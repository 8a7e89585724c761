"""The probe stage: per-rank memory and throughput of every plan (``hsitp.memory`` is its tracker)."""
