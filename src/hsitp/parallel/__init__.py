"""Tensor-parallel layers for the channel-vs-token split study: Megatron column/row TP, head-, token- and 2-D
parallel attention, LayerNorm in both placements, and the cross-band aggregators (TP baseline, D-CHAG).

Process groups are passed explicitly (TPGroup / Mesh2D); nothing here reads globals or env-var switches except
``runtime.start``, the one way a rank starts (it reads torchrun's RANK / WORLD_SIZE / LOCAL_RANK / MASTER_*).
"""
