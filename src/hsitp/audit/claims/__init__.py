"""Claims of the paper as data (``claims.yaml``), the check functions they name, and their verdicts.

Each claim names one check (``check.fn``). A check reads cached results only (the cost tables
``results/RUN/cost/*.nc``, the dataset registry, :mod:`hsitp.cost.stated`, the run's config, and the measured files:
the run's own probe/ and bench/ netCDF, the accuracy run's train/summary.nc) and returns an
:class:`Outcome`: the pipeline's value, where it came from, and either a boolean, a fraction of points where the
claim holds, or a verdict stated by reading (with its reason and source). :func:`decide` turns that into one of
:data:`VERDICTS` under the claim's declared tolerance, so a number that decides a verdict is never typed by hand.

The rules every claim is held to (scope, the paper's formulas first, findings, "by construction" evidence, knife
edges, hedged claims, the flip test, sources, the measured basis, verdicts that can come out against the paper,
circular evidence, boundaries judged by moving them) are written down in ``docs/audit.md``; the functions here
implement the checkable ones (:func:`decide`, :func:`knife_edge`, :func:`hedged`, :func:`circular`,
:func:`check_first_decided`, :func:`check_boundary_moves`).

The package, by responsibility: :mod:`~hsitp.audit.claims.core` (vocabularies, :class:`Outcome`,
:class:`Context`, shared helpers); the check functions (:mod:`~hsitp.audit.claims.computed`,
:mod:`~hsitp.audit.claims.measured`, :mod:`~hsitp.audit.claims.bench`, :mod:`~hsitp.audit.claims.boundary`);
:mod:`~hsitp.audit.claims.registry` (the checks by name, the composite checks),
claims.yaml's rows and tags typed (:mod:`~hsitp.audit.claims.entries`), :mod:`~hsitp.audit.claims.validate`
(loading claims.yaml and what no one row's type can say) and
:mod:`~hsitp.audit.claims.evaluate` (every claim into its row); :mod:`~hsitp.audit.claims.verdicts` (verdicts,
knife edges and flips, hedges, circular evidence); :mod:`~hsitp.audit.claims.render` (the evaluated :class:`Row`
and its counts). The names the commands, the drift check and the workflow use are importable from here."""

from hsitp.audit.claims.core import CLAIMS_FILE, COST_TABLES, VERDICTS, Context
from hsitp.audit.claims.evaluate import evaluate_claims
from hsitp.audit.claims.render import COLUMNS, basis_counts, finding_counts, verdict_counts
from hsitp.audit.claims.validate import config_keys, load_claims

__all__ = [
    "CLAIMS_FILE",
    "COLUMNS",
    "COST_TABLES",
    "Context",
    "VERDICTS",
    "basis_counts",
    "config_keys",
    "evaluate_claims",
    "finding_counts",
    "load_claims",
    "verdict_counts",
]
