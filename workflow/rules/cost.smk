# Cost-model tables, modelled not measured: results/model/{rho,ccr,boundary,scale}.nc (`hsitp model TABLE`).
# Pure arithmetic on the registry's grids and the hardware presets; a `measured:PATH` preset in the config makes
# that calibration file an input of the tables that use it.


rule model_table:
    input:
        model_calibration_inputs,
    output:
        "results/model/{table}.nc",
    log:
        "logs/model/{table}.log",
    wildcard_constraints:
        table="rho|ccr|boundary|scale",
    conda:
        ENV
    params:
        cfg=stage_config("cost"),
    shell:
        "hsitp model {wildcards.table} --config-json {params.cfg:q} --out {output:q} > {log} 2>&1"
