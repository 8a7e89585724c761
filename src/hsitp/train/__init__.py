"""The training stage (``hsitp train``): one plan on one TP group under torchrun, per-epoch record, checkpoints.

``settings`` (the train settings, typed, read once from the validated config), ``plan`` (which jobs, which
architecture, whether they fit), ``data`` (the scene, the partition of its accuracy protocol and the crop
sampler), ``loop`` (the training loop, resume, NaN stop), ``ccr`` (time inside collectives during training), ``checkpoint`` (atomic per-rank state +
manifest), ``record`` (the per-epoch netCDF), ``commands`` (the CLI). ``hsitp.models`` stays free of loops and
files.
"""
