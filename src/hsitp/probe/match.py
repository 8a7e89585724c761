"""The probe at the trained sizes (``probe.match_train``): memory and throughput measured on the very models whose
accuracy is judged. Checked when the DAG is built (light: no torch), one line naming both keys on a mismatch."""

from __future__ import annotations

from hsitp.config import ConfigError
from hsitp.sections import Config


def _trained_scenes(config: Config) -> list[tuple[str, int, int]]:
    """(dataset, bands, classes) of every trained scene the registry knows (bands: PCA components when set)."""
    from hsitp.data import registry

    pca = config.data.pca_components
    known = set(registry.names())
    out = []
    for d in config.train.datasets or config.datasets:
        if d in known:
            spec = registry.get(d)
            out.append((d, pca or spec.bands, spec.n_classes))
    return out


def check_matches_train(config: Config) -> None:
    """With ``probe.match_train``, refuse a probe section whose model or crop differs from the training section's."""
    pc, tc = config.probe, config.train
    if not pc.match_train:
        return
    why = "(probe.match_train: the probe measures the trained models)"
    for key in ("dim", "heads", "depth", "mlp_ratio"):
        if getattr(pc, key) != getattr(tc.model, key):
            raise ConfigError(
                f"probe.{key} = {getattr(pc, key)} differs from train.model.{key} = {getattr(tc.model, key)} {why}"
            )
    if "none" not in pc.checkpointing:  # a training run checkpoints no activation (hsitp.train.record)
        raise ConfigError(
            f"probe.checkpointing = {list(pc.checkpointing)} lacks none, the trained models' policy {why}"
        )
    if pc.batch != tc.batch:
        raise ConfigError(f"probe.batch = {pc.batch} differs from train.batch = {tc.batch} {why}")
    trained = set(tc.datasets or config.datasets)
    crops = [c for c in tc.crops if not c.datasets or trained & set(c.datasets)]
    for i, crop in enumerate(tc.crops):
        if crop in crops and crop.patch != pc.patch:
            raise ConfigError(
                f"probe.patch = {pc.patch} differs from train.crops[{i}].patch = {crop.patch} {why}"
            )
    tokens = sorted({c.tokens for c in crops})
    if sorted(pc.N) != tokens:
        raise ConfigError(f"probe.N = {list(pc.N)} differs from the tokens of train.crops, {tokens} {why}")
    scenes = _trained_scenes(config)
    bands = sorted({b for _, b, _ in scenes})
    if bands and sorted(pc.L) != bands:
        names = ", ".join(d for d, _, _ in scenes)
        raise ConfigError(
            f"probe.L = {list(pc.L)} differs from the bands of train.datasets ({names}): {bands} {why}"
        )
    classes = {c for _, _, c in scenes}
    if classes and pc.classes not in classes:
        raise ConfigError(
            f"probe.classes = {pc.classes} differs from the classes of train.datasets: {sorted(classes)} {why}"
        )
