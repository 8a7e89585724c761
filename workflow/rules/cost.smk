# Cost-model tables, modelled not measured: results/<run>/cost/{rho,ccr,boundary,scale,plan}.nc (`hsitp cost TABLE`).
# Pure arithmetic on the registry's grids and the hardware presets; a `measured:PATH` preset in the config makes
# that calibration file an input of the tables that use it.

# The keys a table reads (cost/tables.py): the model's shared keys (every `cost` key that is not a table's own
# subsection) and its own subsection. rho and boundary also read ccr.patch (the layer shape's patch when the
# table gives none). Editing one table's subsection re-runs that table only.
COST_SHARED_KEYS = keys_except("cost", *COST_TABLES)
COST_TABLE_KEYS = {
    "rho": [*COST_SHARED_KEYS, "cost.rho", "cost.ccr.patch"],
    "ccr": [*COST_SHARED_KEYS, "cost.ccr"],
    "boundary": [*COST_SHARED_KEYS, "cost.boundary", "cost.ccr.patch"],
    "scale": [*COST_SHARED_KEYS, "cost.scale"],
    "plan": [*COST_SHARED_KEYS, "cost.plan"],
}


rule cost_table:
    input:
        cost_calibration_inputs,
    output:
        result("cost/{table}.nc"),
    log:
        log_file("cost/{table}.log"),
    benchmark:
        benchmark_file("cost_table", "{table}")
    wildcard_constraints:
        table="|".join(COST_TABLES),
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("cost_table"),
    params:
        cfg=lambda wildcards: stage_config(*COST_TABLE_KEYS[wildcards.table]),
    shell:
        "hsitp cost {wildcards.table} --config-json {params.cfg:q} --out {output:q} > {log} 2>&1"
