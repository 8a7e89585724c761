"""``hsitp advise split`` (formerly ``hsitp advise``): N from the registry grid, both models' CCRs, one recommendation, clear errors."""

from __future__ import annotations

import json

import pytest

from hsitp.cli import main

NO_CONFIG = ["--config-json", "{}"]
BASE = ["advise", "split", "--patch", "8", "--devices", "8", "--config-json", "{}"]


def _advise_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main([*BASE, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_indian_pines_paper_intra(capsys: pytest.CaptureFixture[str]):
    """Catches a wrong token count or a missing model: Indian Pines at p = 8 is 18 x 18 = 324 tokens, and the
    stated CCRs are the paper's 31.25 (channel, C = 256) and 8000/324 (token)."""
    a = _advise_json(capsys, "--dataset", "indian_pines", "--hardware", "paper-intra")
    assert a["N"] == 324 and a["D"] == 256 and a["devices"] == 8
    assert a["splits"]["channel"]["ccr_stated"] == pytest.approx(31.25)
    assert a["splits"]["token"]["ccr_stated"] == pytest.approx(8000 / 324)
    for split in ("channel", "token", "2d"):
        r = a["splits"][split]
        assert r["ccr_refined"] > 0 and r["layers"] and all(x["t_comp_s"] > 0 for x in r["layers"])
    assert a["recommendation"] in {"channel", "token", "2d", "data_parallel"}
    assert a["reason"] and "not measured" in a["origin"]


def test_pavia_university_uses_real_grid(capsys: pytest.CaptureFixture[str]):
    """Catches the paper's 610 x 610 assumption leaking in: the registry grid is 610 x 340, so N = 76 * 42."""
    a = _advise_json(capsys, "--dataset", "pavia_university", "--hardware", "paper-intra")
    assert (a["H"], a["W"], a["N"]) == (610, 340, 3192)
    assert a["splits"]["token"]["ccr_stated"] == pytest.approx(8000 / 3192)


def test_embed_dim_and_text_output(capsys: pytest.CaptureFixture[str]):
    """Catches --embed-dim being ignored and a text mode that drops the recommendation."""
    a = _advise_json(capsys, "--dataset", "indian_pines", "--embed-dim", "1024")
    assert a["D"] == 1024 and a["splits"]["channel"]["ccr_stated"] == pytest.approx(8000 / 1024)
    assert main([*BASE, "--dataset", "salinas_a", "--hardware", "h100-nvlink-ib"]) == 0
    out = capsys.readouterr().out
    assert "N = 100 tokens" in out and "recommendation:" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "indian_pine"], "valid names: indian_pines, salinas"),
        (["--dataset", "indian_pines", "--hardware", "h100"], "valid presets: paper-intra, paper-inter"),
    ],
)
def test_unknown_names_list_valid_ones(capsys: pytest.CaptureFixture[str], args: list[str], message: str):
    """Catches a traceback or a bare KeyError for a typo: exit 2 and the valid names in the message."""
    assert main([*BASE, *args]) == 2
    assert message in capsys.readouterr().err


def test_patch_larger_than_scene(capsys: pytest.CaptureFixture[str]):
    """Catches N = 0 slipping into a division: a patch bigger than the scene is a clear error."""
    assert (
        main(["advise", "split", "--dataset", "salinas_a", "--patch", "90", "--devices", "2", *NO_CONFIG])
        == 2
    )
    assert "larger than salinas_a's 83x86 grid" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--devices", "8", "--embed-dim", "0"], "--embed-dim 0 is outside 1..65536"),
        (["--devices", "0"], "--devices 0 is outside 1..65536"),
        (["--devices", "100000"], "--devices 100000 is outside 1..65536: A parallel degree P"),
        (["--devices", "512"], "exceeds what one layer can be split into here (N = 324 tokens, D = 256"),
        (["--devices", "2", "--patch", "0"], "--patch 0 is outside 1..65536"),
    ],
)
def test_every_argument_is_validated(capsys: pytest.CaptureFixture[str], args: list[str], message: str):
    """Catches --embed-dim 0 silently becoming the config's 256, and device counts no layer can be split into
    answered with numbers instead of an error (issue 9)."""
    argv = ["advise", "split", "--dataset", "indian_pines", "--patch", "8", "--config-json", "{}", *args]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_one_device_needs_no_parallelism(capsys: pytest.CaptureFixture[str]):
    """Catches a CCR/throughput table reported for P = 1, where nothing is split or communicated."""
    argv = ["advise", "split", "--dataset", "indian_pines", "--patch", "8", "--devices", "1", *NO_CONFIG]
    assert main([*argv, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["recommendation"] == "none" and a["splits"] == {} and "no parallelism needed" in a["reason"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "no parallelism needed" in out and "CCR stated" not in out


def test_measured_calibration_outside_its_world_sizes_warns(capsys: pytest.CaptureFixture[str], repo_root):
    """Catches a calibration fitted at P = 2, 4 silently used for P = 8, and labels that call the same run both
    'measured' and 'not measured'."""
    cal = repo_root / "tests" / "fixtures" / "calibration_small.nc"
    argv = ["advise", "split", "--dataset", "indian_pines", "--patch", "8", "--config-json", "{}"]
    assert main([*argv, "--devices", "8", "--hardware", f"measured:{cal}", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert any("not at P = 8" in w for w in a["warnings"])
    assert "measured hardware constants" in a["origin"] and "not measured" not in a["origin"]
    assert main([*argv, "--devices", "2", "--hardware", f"measured:{cal}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    assert main([*argv, "--devices", "8", "--hardware", f"measured:{cal}"]) == 0
    out = capsys.readouterr().out
    assert "hardware constants: measured calibration" in out and "warning: the calibration was fitted" in out
    assert "not measured" not in out
