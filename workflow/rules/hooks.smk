# What runs around the jobs of a call that runs some (Snakemake calls no hook on a dry run or with nothing to do):
# onstart records the call's jobs for `hsitp report jobs` and, under SLURM, refuses a job no node can hold;
# onsuccess completes the record and says the auditor's verdict.
#
# Snakemake internals, read here only: Snakemake gives a hook its log file's path and nothing else, and no public
# API names the jobs of a call or its executor (docs/stages.md, "The workflow"). They stay in the three functions
# below, so a Snakemake upgrade that renames them breaks these lines only: every test that runs a job runs
# jobs_to_run, tests/test_cluster_fit.py executor_name, tests/test_workflow_run.py dag_holds.
import subprocess
import sys
from pathlib import Path


def jobs_to_run():
    """The jobs this call will run (internal: ``workflow.dag.needrun_jobs()``)."""
    return list(workflow.dag.needrun_jobs())


def dag_holds(rule):
    """Whether this call's DAG holds a job of ``rule``, to run or already done (internal: ``workflow.dag.jobs``)."""
    return any(job.rule.name == rule for job in workflow.dag.jobs)


def executor_name():
    """The executor plugin's name, e.g. "slurm" or "local" (internal: ``workflow.executor_plugin``)."""
    plugin = workflow.executor_plugin
    return None if plugin is None else plugin.name


INVOCATION = (
    []
)  # the record of this snakemake call (hsitp.publish.jobs), set by onstart when jobs will run


def record_invocation():
    """Record this call's jobs and their benchmark files (`hsitp report jobs` reports one call, not a history)."""
    from hsitp.publish.jobs import start_invocation

    jobs = [
        (j.rule.name, str(j.benchmark) if j.benchmark else None) for j in jobs_to_run()
    ]
    INVOCATION.append(start_invocation(Path(LOGS), jobs, sys.argv))


def finish_invocation():
    from hsitp.publish.jobs import finish_invocation as finish

    for record in INVOCATION:
        finish(record)


def check_slurm_fit():
    """Only for jobs that SLURM will run: a job larger than every node of its partition stays PENDING forever."""
    if executor_name() != "slurm":
        return
    from snakemake.exceptions import WorkflowError
    from hsitp.cluster import ClusterFitError, fit_report, misfits, read_partitions

    jobs = [j for j in jobs_to_run() if not j.is_local]
    try:
        lines = misfits([job_request(j) for j in jobs], read_partitions())
    except ClusterFitError as e:
        raise WorkflowError(f"hsitp: {e}")
    if lines:
        raise WorkflowError(f"hsitp: {fit_report(lines)}")


def check_local_nodes():
    """Off SLURM, a rank job spread over nodes (resources.<rule>.ranks_per_node below its P) fails at its start
    (`hsitp launch` needs an allocation), after the jobs before it have run: refuse before the first job.
    """
    if executor_name() == "slurm":
        return
    from snakemake.exceptions import WorkflowError

    spread = sorted(
        {
            f"resources.{rank_resources_key(j.rule.name)}.ranks_per_node = {lay.ranks_per_node} < P = {lay.ranks}"
            for j in jobs_to_run()
            if j.rule.name in RANK_RULES
            for lay in [
                rank_layout_of(j.rule.name, RANK_RULES[j.rule.name], j.wildcards)
            ]
            if lay.multi_node
        }
    )
    if spread:
        raise WorkflowError(
            f"hsitp: {spread[0]} spreads the ranks over nodes, which needs a SLURM allocation (--profile "
            "slurm); set it to null to start every rank on this machine"
            + (f" (and {len(spread) - 1} more)" if len(spread) > 1 else "")
        )


def audit_verdict():
    """The auditor's line, at the end of every call whose DAG holds the audit (onsuccess below): the
    present outputs re-checked against the reference (`hsitp audit verdict`: about a second, nothing written),
    PASS or FAIL with the claims' counts; a FAIL ends Snakemake with exit status 1. The README's audit command
    forces the audit job (--forcerun audit), so a finished run still prints it."""
    if not dag_holds("audit"):
        return
    verdict = subprocess.run(
        [
            "hsitp",
            "audit",
            "verdict",
            "--run-dir",
            RESULTS,
            "--reference",
            AUDIT_REFERENCE,
        ]
    )
    if verdict.returncode != 0:
        sys.exit(1)


onstart:
    record_invocation()
    check_slurm_fit()
    check_local_nodes()


onsuccess:
    finish_invocation()
    audit_verdict()
