"""The probe stage: per-rank memory and throughput of every plan (``hsitp.probe.tracker`` is its tracker)."""
