# CI only (.ci/slurm_smoke.sh): the project's workflow plus planted rules for the SLURM failure checks, run with
# `snakemake -s slurm_planted.smk --profile slurm` from a copy of the workflow.
include: "Snakefile"


# Fails at once: snakemake must exit nonzero and name this rule's log and its SLURM job log.
rule planted_failure:
    output:
        "results/planted/failure.txt",
    log:
        "logs/planted/failure.log",
    resources:
        mem_mb=100,
        runtime=5,
    shell:
        "echo 'planted failure: this rule exits with status 3' > {log}; exit 3"


# Finishes at once: its output must survive the cancelled run and not be rebuilt by the rerun.
rule planted_quick:
    output:
        "results/planted/quick.txt",
    resources:
        mem_mb=100,
        runtime=5,
    shell:
        "echo done > {output}"


# Runs until scancel'ed (HSITP_PLANTED_SLEEP seconds; the rerun sets 1), then writes its output.
rule planted_sleep:
    output:
        "results/planted/sleep.txt",
    log:
        "logs/planted/sleep.log",
    resources:
        mem_mb=100,
        runtime=15,
    shell:
        "sleep ${{HSITP_PLANTED_SLEEP:-600}} > {log} 2>&1; echo slept > {output}"
