"""hsitp: measure how to split a tensor-parallel transformer for hyperspectral images.

Sub-packages: ``data`` (registry, fetch, prepare), ``cost`` (CCR models, pure arithmetic), ``parallel``
(collectives and parallel layers), ``bench`` (microbenchmarks); ``io`` writes every netCDF, ``cli`` runs each stage.
"""

__version__ = "0.1.0"
