"""hsitp.report: figures, tables and notebooks rendered from the stages' netCDF files, never by rerunning a stage.

- :mod:`hsitp.report.outputs`: every figure and table, named once (light: the Snakefile imports it).
- :mod:`hsitp.report.common`: reading, hardware labels, writing PNG/PDF figures and CSV/Markdown/LaTeX tables.
- :mod:`hsitp.report.data`, :mod:`~hsitp.report.cost`, :mod:`~hsitp.report.bench`: one module per stage's page;
  ``notebooks/<stage>.ipynb`` calls them and displays what they return.
- :mod:`hsitp.report.commands`: ``hsitp report notebook STAGE`` (papermill + HTML), one Snakemake rule per stage.
"""
