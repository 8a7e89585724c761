"""The numbers the papers state, each with its section: pure data. The seed paper (the one audited; its formulas and
quoted results are :mod:`hsitp.cost.stated`) and D-CHAG (its published memory, the memory model's, planner's and
probe's yardstick; ../shared/notes/dchag.md). Values as printed; an inferred one says so."""

# Seed paper §6.1 / §8.1: "F = 3e14 FLOP/s (single-card FP16 effective), beta = 3e11 B/s inside a node, 2.5e10 B/s
# between nodes" (its "order-of-magnitude approximations of public specs"); the paper-intra/-inter hardware presets.
PAPER_F = 3e14
PAPER_BETA_INTRA = 3e11
PAPER_BETA_INTER = 2.5e10
# §8.1 model: C = 256, N in {324, 5776}, P in {4, 8}; §8.2 D-CHAG: N = 5776, P = 8, g = 8.
PAPER_C = 256
PAPER_N = (324, 5776)
PAPER_P = (4, 8)
PAPER_DCHAG = {"N": 5776, "P": 8, "g": 8}
# §2.1: each scene's grid and its token count at patch 8 (dataset, N, grid as printed).
PAPER_GRIDS = (("indian_pines", 324, "145x145"), ("pavia_university", 5776, "610x610"))

# D-CHAG's reported memory (GiB, rank 0, 64 GiB MI250X GCDs): synthetic 128x256 input, patch 4, batch 2, depth 32,
# 32 heads. Embedding dims are inferred from the parameter counts (12·D²·depth gives 1.6B, 6.4B, 25.8B at
# D = 2048, 4096, 8192) — an inference, labelled as such in the file. Rows: (name, D, bands, TP degree, GiB per plan).
DCHAG_REFERENCE = (
    ("1.7B_512ch_TP2", 2048, 512, 2, {"tp": 52.5, "dchag_l": 32.4, "dchag_c": 52.8}),
    ("6.6B_256ch_TP4", 4096, 256, 4, {"tp": 62.7, "dchag_l": 42.3, "dchag_c": 56.3}),
    ("26.2B_128ch_TP16", 8192, 128, 16, {"tp": 62.7, "dchag_l": 43.9, "dchag_c": 50.6}),
)
DCHAG_SETTINGS = {  # D-CHAG's synthetic benchmark, shared by every row of DCHAG_REFERENCE
    "height": 128,
    "width": 256,
    "patch": 4,
    "depth": 32,
    "heads": 32,
    "batch": 2,
    "mlp_ratio": 4,
    "classes": 1,
    "dtype": "bfloat16",
}
