"""The probe stage: per-rank memory and throughput of every plan (``hsitp.probe.memory`` is its tracker)."""
