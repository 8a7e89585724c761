# The paper's claims, one by one (results/<run>/tables/paper_claims.{csv,md,json}: `hsitp audit claims`), and the
# drift check of the run against the committed reference (results/<run>/audit/report.md: `hsitp audit check`,
# which fails with a readable diff when a modelled number, a claim's verdict or a bench file's schema drifts).
from pathlib import Path

from hsitp.audit.claims import config_keys

AUDIT_REFERENCE = "results/reference/smoke"
CLAIMS_YAML = "src/hsitp/audit/claims.yaml"


rule audit_claims:
    input:
        expand(result("cost/{table}.nc"), table=COST_TABLES),
        measured=audit_measured_inputs,
        claims=CLAIMS_YAML,
    output:
        csv=result("tables/paper_claims.csv"),
        md=result("tables/paper_claims.md"),
        json=result("tables/paper_claims.json"),
    log:
        log_file("audit/claims.log"),
    benchmark:
        benchmark_file("audit_claims", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("cost_table"),
    params:
        run_dir=lambda wildcards, output: str(Path(output[0]).parent.parent),
        cfg=stage_config(*config_keys()),
    shell:
        "hsitp audit claims --run-dir {params.run_dir:q} --config-json {params.cfg:q} "
        "--out {output.csv:q} > {log} 2>&1"


rule audit:
    input:
        audit_check_inputs,
        claims=result("tables/paper_claims.csv"),
        reference=f"{AUDIT_REFERENCE}/paper_claims.csv",
    output:
        result("audit/report.md"),
    log:
        log_file("audit/check.log"),
    benchmark:
        benchmark_file("audit", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("cost_table"),
    params:
        run_dir=lambda wildcards, output: str(Path(output[0]).parent.parent),
        reference=lambda wildcards, input: str(Path(input.reference).parent),
    shell:
        "hsitp audit check --run-dir {params.run_dir:q} --reference {params.reference:q} "
        "--claims {input.claims:q} --out {output:q} --log {log:q} > {log} 2>&1"
