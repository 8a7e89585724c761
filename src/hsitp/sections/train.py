"""The ``train`` section: the training matrix, the recipe and how a job runs (``hsitp.train.settings.TrainSettings``
is this model with what a job reads from elsewhere)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema

from hsitp.sections.base import BOUNDS, DEF_MARKER, Section, distinct, named, sized

GroupsList = distinct(sized("groups"))
# The control's P: a world size, and at least 2 (a control cell is a parallel plan's).
ControlSize = Annotated[
    int, Field(ge=2, le=BOUNDS["world_size"][1]), WithJsonSchema({DEF_MARKER: "world_size", "minimum": 2})
]


def _absent_not_null(schema: dict[str, Any]) -> None:
    """Each property written as required-if-given: no default and not nullable (None in the model = the key is
    absent from the config, as the schema has no default for it)."""
    for prop in schema["properties"].values():
        prop.pop("default", None)
        options = prop.pop("anyOf", None)
        if options:
            prop.update(next(o for o in options if o != {"type": "null"}))


class Groups(Section):
    """g values per D-CHAG plan."""

    model_config = ConfigDict(json_schema_extra=_absent_not_null)

    dchag_l: GroupsList | None = None  # type: ignore[valid-type]
    """g values for dchag_l."""
    dchag_c: GroupsList | None = None  # type: ignore[valid-type]
    """g values for dchag_c."""


class Crop(Section):
    """One entry of ``train.crops``: the square crop a job trains on."""

    patch: sized("pixels")  # type: ignore[valid-type]
    """Patch edge p (kernel = stride = p per band)."""
    tokens: sized("tokens")  # type: ignore[valid-type]
    """Spatial tokens N per crop, a perfect square (S = patch x sqrt(N))."""
    datasets: distinct(str) | None = None  # type: ignore[valid-type]
    """Trained scenes this crop applies to; null = every trained scene."""


class ModelSizes(Section):
    """``train.model``: the transformer's sizes."""

    dim: sized("dim") = 256  # type: ignore[valid-type]
    """Token width D (divisible by heads)."""
    heads: sized("heads") = 8  # type: ignore[valid-type]
    """Attention heads of the blocks and aggregators; tp and dchag plans need P to divide it."""
    depth: sized("depth") = 12  # type: ignore[valid-type]
    """Transformer blocks."""
    mlp_ratio: sized("mlp_ratio") = 4  # type: ignore[valid-type]
    """MLP hidden width = mlp_ratio x D."""


class Augmentation(Section):
    """``train.augmentation``: photometric augmentation strengths."""

    brightness: float = Field(0.0, ge=0, lt=1)
    """b: each pixel's spectrum multiplied by its own factor, uniform in [1 - b, 1 + b], in the prepared cube's units
    (applied to the standardised input through each band's train mean / std); 0 = off."""
    noise: float = Field(0.0, ge=0)
    """sigma: Gaussian noise added to every band of every pixel, in units of the band's train-pixel std (the
    standardised input); 0 = off."""
    band_mask: float = Field(0.0, ge=0, lt=1)
    """Fraction of the bands (round(fraction x L), drawn per crop) set to their train mean (0 in the standardised
    input) over the whole crop; 0 = off."""


class Ema(Section):
    """``train.ema``: the weights' moving average."""

    decay: float = Field(0.0, ge=0, lt=1)
    """Decay d of shadow = d x shadow + (1 - d) x weights, warmed up as min(d, (1 + t) / (10 + t)) at update t (so
    the first steps do not pin the average to the initial weights); 0 = off."""


class Pretrain(Section):
    """``train.pretrain``: masked-band reconstruction before fine-tuning."""

    steps: int = Field(0, ge=0)
    """Pretraining optimizer steps (train.batch crops each); 0 = off."""
    mask_ratio: float = Field(0.5, gt=0, lt=1)
    """Share of the bands masked per crop (round(ratio x L), at least 1)."""
    lr: float = Field(0.001, gt=0)
    """Peak AdamW learning rate of pretraining (warm-up over a tenth of the steps, cosine to 0; weight decay
    train.weight_decay)."""


class Validation(Section):
    """``train.validation``: the held-out train pixels."""

    fraction: float = Field(0.2, ge=0, lt=1)
    """Share of the train pixels held out: per class under the random protocol (each class keeps >= 1 train pixel),
    as whole training blocks (data.partition.block) under the block protocol; 0 = none."""
    folds: int = Field(1, ge=1)
    """Inner folds: >= 2 splits the train pixels into this many folds and holds out fold `fold` (then `fraction` is
    not read), so the folds together validate every train pixel once: stratified pixel folds under the random
    protocol, whole training blocks stratified by class under the block protocol (scikit-learn's
    StratifiedGroupKFold, seeded by the master seed). 1 = the single hold-out of `fraction`. Set per trial by
    `hsitp tune` (tune.block_validation)."""
    fold: int = Field(0, ge=0)
    """Which of the `folds` inner folds is held out (0-based; read only when folds >= 2)."""


class Sampling(Section):
    """``train.sampling``: the loss pixels of a step."""

    mode: Literal["all", "stratified"] = "all"
    """all = every train pixel of the crops; stratified = at most per_class of each class, redrawn every step from
    the sampler's generator (FPGA's GS^2 class balance; resume stays bit-exact)."""
    per_class: int = Field(16, ge=1)
    """k, the most train pixels of one class in one step's loss under mode: stratified (a class absent from the
    crops contributes nothing)."""


class Control(Section):
    """``train.control``: the untuned control's cells."""

    world_sizes: distinct(ControlSize, 0) = ()  # type: ignore[valid-type]
    """P of the control cells (each must be one of train.world_sizes)."""


class Equivalence(Section):
    """``train.equivalence``: the P-rank check of each single-process equivalent."""

    epochs: int = Field(2, ge=0)
    """Epochs the distributed check trains, at most train.epochs (the equivalent is also evaluated then)."""
    seed: sized("seed") = 0  # type: ignore[valid-type]
    """Seed of the check runs (one of train.seeds)."""
    tolerance: float = Field(0.0005, ge=0)
    """Largest |OA(check) - OA(equivalent)| that passes (0.0005: equal to 3 decimals)."""


class Verdict(Section):
    """``train.verdict``: the equal-accuracy test."""

    margin: float = Field(0.01, gt=0)
    """delta, the equivalence margin (0.01 = 1 percentage point)."""
    level: float = Field(0.95, gt=0, lt=1)
    """Two-sided confidence level of each interval (per comparison; no multiplicity correction)."""


class Checkpoint(Section):
    """``train.checkpoint``: how many checkpoints stay."""

    keep: int = Field(2, ge=1)
    """Complete checkpoints kept (the newest ones; the final epoch's is always among them)."""


class Debug(Section):
    """``train.debug``: fault injection."""

    nan_at_step: int | None = Field(None, ge=0)
    """Make the loss NaN at this global step (0-based), to test the NaN stop."""
    fail_at_step: int | None = Field(None, ge=0)
    """Raise an injected failure at the start of this global step (0-based), to test resuming after a crash
    mid-epoch."""


class TrainSection(Section):
    """The training stage (`hsitp train` under torchrun, results/<run>/train/DATASET/): per-pixel semantic
    segmentation of S x S crops (S = patch x sqrt(tokens), one entry of crops) with cross-entropy on train pixels
    only, one job per (dataset, crop N, plan, P, g, protocol, seed). Tensor parallelism only (no data-parallel
    replicas): the launched world is one TP group of P ranks. Backend and timeout are the parallel section's."""

    datasets: distinct(str) | None = None  # type: ignore[valid-type]
    """Scenes to train on (their prepared files results/<run>/data/DATASET.nc); null = the top-level `datasets` (not
    [], which trained them all too: a run that trains nothing leaves train out of `stages`)."""
    plans: distinct(named("plan")) = ("tp", "dchag_l", "dchag_c", "token")  # type: ignore[valid-type]
    """Parallel plans to train (hsitp.models.plans): dense (trained once, at P = 1, whatever world_sizes holds), tp,
    dchag_l, dchag_c, token."""
    world_sizes: distinct(sized("world_size")) = (2, 4, 8)  # type: ignore[valid-type]
    """TP sizes P of the parallel plans; one torchrun launch of P ranks per job (dense always runs at P = 1)."""
    groups: Groups = Groups(dchag_l=(4, 8), dchag_c=(4,))
    """D-CHAG groups per rank g, per dchag plan (e.g. {dchag_l: [4, 8], dchag_c: [4]}); every other plan runs at
    g = 1."""
    protocols: distinct(named("protocol")) = ("random",)  # type: ignore[valid-type]
    """Accuracy protocols of the prepared file to train on (each one's train/test partition, its `partition`
    variable; each one of data.partition.protocols): random (pixels drawn per class) or block (spatially disjoint blocks). Not the TP split (channel /
    token): docs/contracts.md, Shared names."""
    seeds: distinct(sized("seed")) = (0,)  # type: ignore[valid-type]
    """Training seeds (model init, crop sampler, augmentation); one job per seed."""
    epochs: int = Field(50, ge=1)
    """Epochs to train (the paper trains 50)."""
    steps_per_epoch: int = Field(100, ge=1)
    """Optimizer steps per epoch (an epoch is a fixed number of steps, not a pass over the pixels; one step per epoch
    is memory-tracked)."""
    batch: sized("batch") = 1  # type: ignore[valid-type]
    """Crops per optimizer step (identical on every rank of the TP group)."""
    crops: distinct(Crop) = (Crop(patch=8, tokens=324),)  # type: ignore[valid-type]
    """Crop sizes to train at, each {patch, tokens, datasets}: patch edge p (kernel = stride = p per band), N =
    tokens spatial tokens per crop (a perfect square), so the crop edge is S = p x sqrt(N) and must fit the scene
    (Indian Pines 145 x 145: N = 324 with patch 8 gives S = 144; Pavia University 610 x 340 takes N = 5776 with
    patch 4, S = 304). datasets = the trained scenes the crop applies to (null = every one). One job per crop and
    per (plan, P, g, protocol, seed); N is in the run name, so two crops of one scene need distinct tokens. Replaces
    the former train.patch and train.tokens."""
    model: ModelSizes = ModelSizes()
    """Transformer sizes (hsitp.models.ModelConfig); bands and classes come from the prepared file, the crop from
    the job's entry of crops."""
    lr: float = Field(0.001, gt=0)
    """Peak AdamW learning rate (after warm-up; cosine decay to 0 over epochs x steps_per_epoch)."""
    weight_decay: float = Field(0.05, ge=0)
    """AdamW weight decay."""
    warmup_steps: int = Field(100, ge=0)
    """Linear warm-up steps of the learning rate from 0 to lr."""
    augment: bool = True
    """Random horizontal/vertical flips and rot90 of every crop (seeded; identical on the ranks of a TP group)."""
    label_smoothing: float = Field(0.0, ge=0, le=1)
    """Cross-entropy label smoothing epsilon (0 = plain CE); a regulariser against over-confident logits on few
    labels, tested in the ablation (docs/measured.md)."""
    augmentation: Augmentation = Augmentation()
    """Photometric augmentation of every training crop after its flips and rot90 (train.augment), drawn from the
    sampler's seeded generator (identical on the ranks of a TP group; resume stays bit-exact); the labels are not
    touched. Every strength 0 (the default) draws nothing, so runs without it are unchanged. One of the ingredients
    of a recipe for new places (the block protocol); docs/stages.md, Training."""
    tta: Literal["none", "flips", "dihedral"] = "none"
    """Test-time augmentation of the whole-scene prediction (every evaluation: validation, test, the final map):
    none; flips = each tile also predicted flipped left-right, up-down and both, each output flipped back, the
    logits averaged (4 forward passes per tile); dihedral = those and their transposes (8). Evaluation only: the
    training trajectory is the same."""
    ema: Ema = Ema()
    """An exponential moving average of the weights, updated after every optimizer step and used for every
    evaluation (validation, test, the final map) instead of the raw weights; saved in each checkpoint and restored
    on resume. The training trajectory is that of the raw weights."""
    pretrain: Pretrain = Pretrain()
    """Self-supervised masked-band reconstruction before fine-tuning: random crops of the whole scene (every pixel's
    spectrum, test and unlabelled pixels included; no label is read), a random share of each crop's bands set to
    their mean, the encoder plus a temporary per-pixel linear head trained to reconstruct them (mean squared error on
    the masked bands). Transductive: it sees the test pixels' spectra (never their labels), and every record it
    touches says so (attribute `transductive`); the classical baselines get no such unlabelled-data advantage. Runs
    once at the start of a run (not again on resume)."""
    validation: Validation = Validation()
    """Train pixels held out of the loss to take every recipe decision on (never the test pixels); drawn from the
    master `seed`, the same for every job of a run."""
    sampling: Sampling = Sampling()
    """Which train pixels of each step's crops enter the loss."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Compute device: auto = CUDA when torch sees a GPU (bf16 autocast), else CPU (fp32)."""
    threads_per_rank: int = Field(1, ge=1)
    """torch.set_num_threads of every rank; a job at P asks for P times this."""
    deterministic: bool = True
    """torch.use_deterministic_algorithms(True) (on CPU in fp32 a resumed run then equals an uninterrupted one bit
    for bit)."""
    eval_every: int = Field(5, ge=1)
    """Evaluate every this-many epochs (and in each of the last summary_epochs, and after the last): whole-scene
    tiled prediction scored on the protocol's test pixels (OA, AA, kappa, per-class accuracy in the record; NaN at
    epochs not evaluated)."""
    summary_epochs: int = Field(10, ge=1)
    """The paper's summary numbers (test OA / AA / kappa, each evaluated in every one of these epochs, tokens/s,
    memory (tracked only in these epochs), ccr_inline) are means over the last this-many epochs (all epochs if
    fewer)."""
    recipe: Literal["config", "tuned"] = "config"
    """Where each job's lr, weight decay, label smoothing, warm-up and per_class come from. config = this section
    (one recipe for every plan); tuned = the best trial of the job's own tuning study
    (results/<run>/tune/DATASET/PLAN_PROTOCOL.nc, stage tune, which then runs first), each plan on its own recipe and
    each D-CHAG plan at the study's g (train.groups is then not read), sampling stratified."""
    control: Control = Control()
    """The untuned control of train.recipe tuned: every D-CHAG plan of train.plans also trained at these P on tp's
    tuned recipe (tp's study on the same protocol) at train.groups, the way D-CHAG was compared before it had its
    own recipe; summarised apart in train/control_summary.nc beside tp, so the tables show what tuning D-CHAG's own
    recipe changed. [] = none; read only under train.recipe tuned with a D-CHAG plan in train.plans, and then
    tp must be among train.plans too."""
    equivalent: bool = False
    """Accuracy runs: train each (plan, P, g) as its single-process equivalent, architecture_for(base, plan, P, g)
    in one process (the parity tests show it equals the plan over P ranks), and tp once (its architecture does not
    depend on P). Such runs hold no bench_slot; their tokens/s and memory are one process's, not the plan's.
    false = every job runs on P ranks."""
    equivalence: Equivalence = Equivalence()
    """Under equivalent: one real P-rank run per (plan, P >= 2, g) at this seed on the first protocol, on the same
    schedule but stopped after `epochs` epochs; its test OA there must match the equivalent's within `tolerance`
    (train/equivalence.nc). epochs 0 = no check."""
    verdict: Verdict = Verdict()
    """"Equal accuracy" per cell (hsitp.evaluate.verdict): the paired-by-seed interval of plan minus tp at this
    level must lie inside +-margin (fractions of OA / AA)."""
    checkpoint: Checkpoint = Checkpoint()
    """Atomic per-epoch checkpoints under results/<run>/train/DATASET/checkpoints/<name>/ (per-rank state, manifest
    written last)."""
    debug: Debug = Debug()
    """Fault injection for tests; leave null."""
