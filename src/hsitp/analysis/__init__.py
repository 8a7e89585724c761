"""hsitp.analysis: the stages' files read into tidy tables, for a run folder and a committed reference alike.

Cells with mean, spread, paired intervals and verdicts (:mod:`.cells`); the one-table answer, time to accuracy,
Pareto points and the tuning effect (:mod:`.answer`); the headline experiment's tables (:mod:`.headline`); which
hardware a number belongs to (:mod:`.labels`); one Markdown writer (:mod:`.tables`). report, publish and audit
render or compare what these return; nothing here draws or writes a page."""
