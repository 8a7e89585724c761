"""The probe at the trained sizes (``probe.match_train``): memory and throughput measured on the very models whose
accuracy is judged. Checked when the DAG is built (light: no torch), one line naming both keys on a mismatch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hsitp.config import ConfigError


def _trained_scenes(config: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(dataset, bands, classes) of every trained scene the registry knows (bands: PCA components when set)."""
    from hsitp.data import registry

    pca = config.get("data", {}).get("pca_components")
    known = set(registry.names())
    out = []
    for d in config["train"]["datasets"]:
        if d in known:
            spec = registry.get(d)
            out.append((d, int(pca) if pca else int(spec.bands), int(spec.n_classes)))
    return out


def check_matches_train(config: Mapping[str, Any]) -> None:
    """With ``probe.match_train``, refuse a probe section whose model or crop differs from the training section's."""
    pc, tc = config["probe"], config["train"]
    if not pc.get("match_train"):
        return
    why = "(probe.match_train: the probe measures the trained models)"
    for key in ("dim", "heads", "depth", "mlp_ratio"):
        if int(pc[key]) != int(tc["model"][key]):
            raise ConfigError(
                f"probe.{key} = {pc[key]} differs from train.model.{key} = {tc['model'][key]} {why}"
            )
    if int(pc["batch"]) != int(tc["batch"]):
        raise ConfigError(f"probe.batch = {pc['batch']} differs from train.batch = {tc['batch']} {why}")
    trained = set(tc["datasets"])
    crops = [c for c in tc["crops"] if not c.get("datasets") or trained & set(c["datasets"])]
    for i, crop in enumerate(tc["crops"]):
        if crop in crops and int(crop["patch"]) != int(pc["patch"]):
            raise ConfigError(
                f"probe.patch = {pc['patch']} differs from train.crops[{i}].patch = {crop['patch']} {why}"
            )
    tokens = sorted({int(c["tokens"]) for c in crops})
    if sorted(int(n) for n in pc["N"]) != tokens:
        raise ConfigError(f"probe.N = {list(pc['N'])} differs from the tokens of train.crops, {tokens} {why}")
    scenes = _trained_scenes(config)
    bands = sorted({b for _, b, _ in scenes})
    if bands and sorted(int(v) for v in pc["L"]) != bands:
        names = ", ".join(d for d, _, _ in scenes)
        raise ConfigError(
            f"probe.L = {list(pc['L'])} differs from the bands of train.datasets ({names}): {bands} {why}"
        )
    classes = {c for _, _, c in scenes}
    if classes and int(pc["classes"]) not in classes:
        raise ConfigError(
            f"probe.classes = {pc['classes']} differs from the classes of train.datasets: {sorted(classes)} {why}"
        )
