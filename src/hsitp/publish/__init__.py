"""What leaves a run for readers: the committed reference, docs/measured.md, a run's time per stage, the rendered-report
check. Above report (it reads report's tables), below audit (which reads the reference)."""
