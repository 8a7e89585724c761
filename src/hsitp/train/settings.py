"""The training settings, typed: read once from the validated config where a command starts (``hsitp train``,
``hsitp tune``, the ingredients ablation, the Snakemake DAG through :mod:`hsitp.train.plan`) and passed down; nothing below
reads ``config["train"]``.

The settings are the section's model (:class:`hsitp.sections.train.TrainSection`, which the schema is generated
from), so a setting is found by the config's own path: ``train.A.B`` is ``settings.A.B``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from hsitp.sections import Config
from hsitp.sections.train import TrainSection
from hsitp.settings import CONFIG

# Keys of `train` that do not change the trajectory: a checkpoint made under other values is resumed from. The
# job's crop is in "model"; the launched ranks are in the checkpoint's layout; the check and the verdict are read
# after training.
_NOT_TRAJECTORY = (
    "debug", "checkpoint", "summary_epochs", "datasets", "plans", "world_sizes", "groups", "protocols", "seeds",
    "device", "threads_per_rank", "crops", "equivalent", "equivalence", "verdict",
)  # fmt: skip
# train keys that are no part of the recipe: the job matrix (one job's dataset, crop, plan, P, g, protocol, seed are
# its cell), where and how it runs, what is recorded, and fault injection
RECIPE_EXCLUDED = (
    "datasets", "crops", "plans", "world_sizes", "groups", "protocols", "seeds", "device", "threads_per_rank",
    "deterministic", "eval_every", "summary_epochs", "checkpoint", "debug", "equivalent", "equivalence", "verdict",
    "control",
)  # fmt: skip


class TrainSettings(TrainSection):
    """The ``train`` section of one validated config, with what a job reads from elsewhere."""

    datasets: tuple[str, ...]  # type: ignore[assignment]
    """Scenes trained: ``train.datasets``, or the top-level ``datasets`` when it is null."""
    seed: int
    """The master seed: draws the validation pixels of the protocol's train pixels."""
    partitions: tuple[int, ...]
    """Partition indices trained, one job each with every seed (``range(data.partition.draws)``; a replicate is
    (partition, seed))."""
    attention_kernel: str
    """``model.attention_kernel``: the single-query attentions' kernel, auto, exact or sdpa (resolved for the job's
    device when it builds its model: ``hsitp.models.resolve_attention_kernel``)."""
    recipe_plan: str | None = None
    """Whose tuned recipe a control job trains on (``--recipe-plan``, put in ``train`` by the tuned recipe); None:
    its own."""
    config: CONFIG = Field(repr=False, exclude=True)
    """The whole config these were read from, never read for a setting: hashed into the record's provenance, its
    recipe hash and the checkpoint's key (the JSON of its train section, so a hash does not depend on how these
    fields are laid out: the committed references' recipe hashes hold)."""

    @classmethod
    def from_config(cls, config: Config, recipe_plan: str | None = None) -> TrainSettings:
        """The settings of the typed config (:func:`hsitp.config.validate_config`); ``recipe_plan`` as
        :func:`hsitp.train.recipe.apply_recipe` returns it."""
        tc = config.train
        return cls(
            **{**dict(tc), "datasets": tc.datasets or config.datasets},
            seed=config.seed,
            partitions=tuple(range(config.data.partition.draws)),
            attention_kernel=config.model.attention_kernel,
            recipe_plan=recipe_plan,
            config=config,
        )

    @property
    def transductive(self) -> bool:
        """Whether the run sees the test pixels' spectra in a loss (masked-band pretraining), not only as the
        input of its crops: its numbers must say so beside them."""
        return self.pretrain.steps > 0

    def ingredients(self) -> dict[str, Any]:
        """Which of the recipe's optional ingredients ran and how strong (the record's ``ingredients``)."""
        return {
            "augment_flips_rot90": self.augment,
            "augmentation": self.augmentation.model_dump(),
            "tta": self.tta,
            "ema_decay": self.ema.decay,
            "pretrain": self.pretrain.model_dump(),
        }

    @property
    def per_class(self) -> int | None:
        """The per-class cap of a step's loss pixels under stratified sampling; None under "all"."""
        return self.sampling.per_class if self.sampling.mode == "stratified" else None

    def _train_json(self) -> dict[str, Any]:
        """The config's train section as JSON, with ``recipe_plan`` when a control job trains on another plan's
        recipe (it enters the recipe hash: a control run is never summarised as the plan's own recipe)."""
        train = self.config.train.as_json()
        return train | {"recipe_plan": self.recipe_plan} if self.recipe_plan else train

    def recipe_record(self) -> dict[str, Any]:
        """The training recipe of a run: every `train` key that shapes the trained weights apart from the job's
        cell (optimiser, schedule, steps, model sizes, sampling, augmentation, smoothing, validation), plus the
        master `seed` (it draws the train/test partition and the validation pixels)."""
        keep = {k: v for k, v in sorted(self._train_json().items()) if k not in RECIPE_EXCLUDED}
        return json.loads(json.dumps({"train": keep, "seed": self.config.seed}, sort_keys=True))

    def recipe_hash(self) -> str:
        """12 hex digits of the SHA-256 of :meth:`recipe_record` (sorted-key JSON): equal recipes, equal hashes."""
        text = json.dumps(self.recipe_record(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def trajectory_key(self) -> dict[str, Any]:
        """The train keys that shape a run's trajectory, as JSON (a checkpoint is resumed only under equal keys)."""
        keys = {k: v for k, v in self._train_json().items() if k not in _NOT_TRAJECTORY}
        if self.attention_kernel != "auto":  # the kernels round differently: a resumed run keeps its kernel
            keys["attention_kernel"] = self.attention_kernel
        return json.loads(json.dumps(keys, sort_keys=True))
