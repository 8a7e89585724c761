"""Bad input to every ``hsitp`` subcommand and the config loader (issue 40, item 2): a config or input file that
is missing, a folder, empty, binary, of the wrong kind or inconsistent is refused with exit status 2 and exactly
one stderr line ``hsitp: error: ...`` naming the file or option; never a traceback, never a silent default, and
no output file (nor a temporary one) is left behind.

The commands run in-process (``hsitp.cli.main``; one import for all cases); ``test_real_stderr_is_one_line``
runs a few in a subprocess, where logging and Python's own traceback printing are the real ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

from hsitp.cli import main, one_line

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "fixtures" / "report_bench"
MICROBENCH = BENCH / "microbench.nc"
CALIBRATION = BENCH / "calibration.nc"
REFERENCE = ROOT / "results" / "reference" / "smoke"


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every kind of bad file, by name (paths as strings, for ``str.format`` into argv)."""
    d = tmp_path_factory.mktemp("bad")
    files: dict[str, bytes] = {
        "empty": b"",
        "garbage": bytes(range(256)) * 4,
        "text": b"hello\nworld\n",
        "blank_yaml": b"  \n\n",
        "comments_yaml": b"# nothing set here\n",
        "list_yaml": b"- run: smoke\n",
        "scalar_yaml": b"42\n",
        "latin1_yaml": "run: caf\xe9\n".encode("latin-1"),
        "notyaml_yaml": b"data: [unclosed\n",
        "dup_yaml": b"run: smoke\nseed: 1\nrun: paper\n",
        "schema_yaml": b"bogus: 1\nrun: a/b\n",
        "list_json": b"[1, 2]\n",
        "noid_csv": b"a,b\n1,2\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    (d / "adir").mkdir()
    raw = CALIBRATION.read_bytes()
    (d / "truncated_nc").write_bytes(raw[: len(raw) // 2])  # a copy cut short
    # A microbench file an older hsitp wrote under the same schema version: no means over repeats, no padding flag.
    with xr.open_dataset(MICROBENCH) as ds:
        old = ds.load()
    old = old.drop_vars([v for v in ("time_mean", "coll_time_mean") if v in old.variables])
    old.attrs.pop("head_padding", None)
    old.to_netcdf(d / "old_microbench_nc")
    (d / "meta").mkdir()
    (d / "meta" / "x.nc").write_text("not a netCDF\n")
    (d / "figs").mkdir()
    (d / "figs" / "x.png").write_text("not a PNG\n")
    out = {
        name: str(d / name) for name in [*files, "adir", "truncated_nc", "old_microbench_nc", "meta", "figs"]
    }
    out.update(microbench=str(MICROBENCH), calibration=str(CALIBRATION), reference=str(REFERENCE))
    return out


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], outputs: list[Path] = ()) -> str:
    """Run ``hsitp argv`` in-process; assert the refusal contract; return the one error line."""
    code = main(argv)
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert "Traceback" not in captured.err, captured.err
    assert code == 2, (code, captured.err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("hsitp: error: "), lines
    for out in outputs:
        assert not out.exists(), f"{out} written although the command failed"
        leftovers = list(out.parent.glob(f".{out.name}.*")) if out.parent.exists() else []
        assert not leftovers, f"temporary files left: {leftovers}"
    return lines[0]


def _argv(template: list[str], bad: dict[str, str], out: Path) -> list[str]:
    return [part.format(out=out, **bad) for part in template]


# `advise split` reading a measured calibration (hardware `measured:PATH`), PATH appended by each case
ADVISE_SPLIT = [
    "advise",
    "split",
    "--dataset",
    "indian_pines",
    "--patch",
    "8",
    "--devices",
    "4",
    "--hardware",
]


# --- config files and --config-json -------------------------------------------------------------------------------
CONFIG_FILES = [
    # (file, what the line must say)
    ("{adir}/missing.yaml", "does not exist"),
    ("{adir}", "is a directory"),
    ("{empty}", "is empty"),
    ("{blank_yaml}", "is empty"),
    ("{comments_yaml}", "holds no settings"),
    ("{garbage}", "is not UTF-8 text"),
    ("{latin1_yaml}", "is not UTF-8 text"),
    ("{list_yaml}", "must hold a mapping at the top level, found list"),
    ("{scalar_yaml}", "must hold a mapping at the top level, found int"),
    ("{notyaml_yaml}", "is not valid YAML"),
    ("{dup_yaml}", "key 'run' given twice"),
]


@pytest.mark.parametrize(("config", "says"), CONFIG_FILES, ids=[c[0].strip("{}") for c in CONFIG_FILES])
def test_bad_config_file(
    config: str, says: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a config file that is missing, a folder, empty or comments only (used to become all defaults
    silently), binary or Latin-1 (a UnicodeDecodeError traceback), a folder (IsADirectoryError traceback), YAML of
    the wrong shape, broken YAML (a four-line PyYAML message) or with a key given twice (the last one silently
    won): each must be one line naming the file."""
    out = tmp_path / "rho.nc"
    path = config.format(**bad)
    line = refused(["cost", "rho", "--out", str(out), "--config", path], capsys, [out])
    assert path in line and says in line, line


CONFIG_JSON = [
    ("", "--config-json is empty"),
    ("{nope", "--config-json is not valid JSON"),
    ("[1, 2]", "--config-json must be a JSON object ({...}), found list"),
    ("null", "found null"),
    ("0", "found int"),
    ("5", "found int"),
    ('"smoke"', "found str"),
]


@pytest.mark.parametrize(
    ("value", "says"), CONFIG_JSON, ids=["empty", "not-json", "list", "null", "0", "5", "str"]
)
def test_bad_config_json(value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches --config-json that is not a JSON object: a list, number or string used to end in an
    AttributeError traceback, and null or 0 silently meant "no overrides"."""
    out = tmp_path / "rho.nc"
    line = refused(["cost", "rho", "--out", str(out), "--config-json", value], capsys, [out])
    assert "--config-json" in line and says in line, line


def test_invalid_config_is_one_line(
    bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches the schema's refusal printed over several lines (``invalid config:`` then one problem a line): a
    log's last line then said only where the schema lives. Every problem must stay on the one line."""
    out = tmp_path / "rho.nc"
    line = refused(["cost", "rho", "--out", str(out), "--config", bad["schema_yaml"]], capsys, [out])
    assert line.startswith("hsitp: error: invalid config: <top level>: Additional properties"), line
    assert "'bogus' was unexpected" in line and "run: 'a/b' does not match" in line and "(schema: " in line


COMMANDS_WITH_CONFIG = {
    "data list": ["data", "list"],
    "advise split": ["advise", "split", "--dataset", "indian_pines", "--patch", "8", "--devices", "4"],
    "probe estimate": ["probe", "estimate", "--out", "{out}"],
    "bench calibrate": ["bench", "calibrate", "--microbench", "{microbench}", "--out", "{out}"],
    "audit claims": ["audit", "claims", "--run-dir", "{reference}", "--out", "{out}"],
    "baseline": [
        "baseline",
        "indian_pines",
        "--protocol",
        "random",
        "--data",
        "{calibration}",
        "--out",
        "{out}",
    ],
}


@pytest.mark.parametrize("command", list(COMMANDS_WITH_CONFIG))
def test_empty_config_refused_by_every_command(
    command: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a subcommand that reads its config some other way than the shared loader, so that an empty
    --config there still silently means all defaults (probe estimate and baseline then ran for minutes)."""
    out = tmp_path / "out.nc"
    argv = [*_argv(COMMANDS_WITH_CONFIG[command], bad, out), "--config", bad["empty"]]
    line = refused(argv, capsys, [out])
    assert bad["empty"] in line and "is empty" in line, line


# --- netCDF inputs ------------------------------------------------------------------------------------------------
NETCDF_INPUTS = {
    "bench merge": ["bench", "merge", "{bad}", "--out", "{out}"],
    "bench calibrate": ["bench", "calibrate", "--microbench", "{bad}", "--out", "{out}"],
    "bench compare": [
        "bench",
        "compare",
        "--microbench",
        "{bad}",
        "--calibration",
        "{calibration}",
        "--out",
        "{out}",
    ],
    "probe merge": ["probe", "merge", "{bad}", "--memory-out", "{out}", "--throughput-out", "{out}.t.nc"],
    "train summary": ["train", "summary", "{bad}", "--out", "{out}"],
    "baseline": ["baseline", "indian_pines", "--protocol", "random", "--data", "{bad}", "--out", "{out}"],
    "advise split": [*ADVISE_SPLIT, "measured:{bad}"],
}
BAD_NETCDF = {
    "missing": ("{adir}/missing.nc", "no such"),
    "empty": ("{empty}", "is empty (0 bytes)"),
    "text": ("{text}", "not a readable netCDF"),
    "garbage": ("{garbage}", "not a readable netCDF"),
    "directory": ("{adir}", "is a directory"),
    "truncated": ("{truncated_nc}", "not a readable netCDF"),
}
NETCDF_CASES = [
    (c, b) for c in NETCDF_INPUTS for b in BAD_NETCDF if b != "truncated" or c == "bench calibrate"
]


@pytest.mark.parametrize(("command", "kind"), NETCDF_CASES, ids=[f"{c}-{b}" for c, b in NETCDF_CASES])
def test_bad_netcdf_input(
    command: str, kind: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a netCDF input that is missing, empty, text, random bytes, a folder or cut short reaching the
    stage as a traceback, or as a message telling the user to delete a folder; each must be one line naming the
    file, and the command's output must not appear."""
    out = tmp_path / "out.nc"
    path, says = BAD_NETCDF[kind]
    path = path.format(**bad)
    argv = [part.format(out=out, bad=path, **{k: v for k, v in bad.items() if k != "bad"}) for part in
            NETCDF_INPUTS[command]]  # fmt: skip
    line = refused(argv, capsys, [out, Path(f"{out}.t.nc")])
    assert path in line and says in line, line
    if kind == "directory":
        assert "delete it" not in line, line


WRONG_KIND = {
    "bench merge": (["bench", "merge", "{calibration}", "--out", "{out}"], "expected 'microbench'"),
    "bench calibrate": (
        ["bench", "calibrate", "--microbench", "{calibration}", "--out", "{out}"],
        "expected 'microbench'",
    ),
    "bench compare": (
        [
            "bench",
            "compare",
            "--microbench",
            "{old_microbench_nc}",
            "--calibration",
            "{microbench}",
            "--out",
            "{out}",
        ],
        "lacks variable 'time_mean'",
    ),
    "probe merge": (
        ["probe", "merge", "{calibration}", "--memory-out", "{out}", "--throughput-out", "{out}.t.nc"],
        "expected 'probe_partial'",
    ),
    "train summary": (["train", "summary", "{microbench}", "--out", "{out}"], "expected 'train'"),
    "baseline": (
        ["baseline", "indian_pines", "--protocol", "random", "--data", "{calibration}", "--out", "{out}"],
        "expected 'dataset'",
    ),
    "advise split": ([*ADVISE_SPLIT, "measured:{microbench}"], "expected 'calibration'"),
}


@pytest.mark.parametrize("command", list(WRONG_KIND))
def test_netcdf_of_another_stage(
    command: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a valid hsitp netCDF of another stage (or one an older hsitp wrote, lacking what this one reads)
    being read anyway, to fail later with a KeyError traceback or wrong numbers."""
    out = tmp_path / "out.nc"
    template, says = WRONG_KIND[command]
    line = refused(_argv(template, bad, out), capsys, [out, Path(f"{out}.t.nc")])
    assert says in line, line


def test_microbench_of_an_older_hsitp(
    bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a microbench file an older hsitp wrote under the same schema version (no means over repeats, no
    head_padding) ending ``bench calibrate`` in a KeyError traceback instead of naming what it lacks."""
    out = tmp_path / "cal.nc"
    line = refused(
        ["bench", "calibrate", "--microbench", bad["old_microbench_nc"], "--out", str(out)], capsys, [out]
    )
    assert bad["old_microbench_nc"] in line, line
    for name in ("variable 'time_mean'", "variable 'coll_time_mean'", "attribute 'head_padding'"):
        assert name in line, line
    assert "lacks" in line and "re-run `hsitp bench run`" in line, line


# --- other inputs: claims tables, fetch manifests, report folders -------------------------------------------------
AUDIT_CLAIMS = {
    "missing": ("{adir}/missing.csv", "no such claims table (--claims)"),
    "directory": ("{adir}", "is a directory"),
    "garbage": ("{garbage}", "not UTF-8 text"),
    "empty": ("{empty}", "empty claims table"),
    "no-id-column": ("{noid_csv}", "no id, kind, verdict column"),
    "json": ("{list_json}", "not a claims table"),
}


@pytest.mark.parametrize("kind", list(AUDIT_CLAIMS))
def test_audit_check_bad_claims(
    kind: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a --claims table that does not exist (reported as drift: exit 1), is a folder, binary (IsADirectoryError / UnicodeDecodeError tracebacks), has no
    id column (KeyError traceback) or is empty (reported as 191 claims "missing now": drift, not bad input)."""
    out = tmp_path / "report.md"
    path, says = AUDIT_CLAIMS[kind]
    path = path.format(**bad)
    argv = ["audit", "check", "--run-dir", str(tmp_path), "--reference", bad["reference"], "--claims", path]
    line = refused([*argv, "--out", str(out)], capsys, [out])
    assert path in line and says in line, line


def test_audit_missing_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``audit check`` on a --run-dir that does not exist reported as drift (exit 1, a report written)
    instead of bad input."""
    out = tmp_path / "report.md"
    line = refused(["audit", "check", "--run-dir", str(tmp_path / "nope"), "--out", str(out)], capsys, [out])
    assert str(tmp_path / "nope") in line and "no such run folder" in line, line


@pytest.mark.parametrize(("manifest", "says"), [("{adir}", "is a directory"), ("{list_json}", "unreadable")])
def test_data_prepare_bad_manifest(
    manifest: str, says: str, bad: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a fetch manifest that is a folder (IsADirectoryError traceback) or JSON of the wrong shape."""
    out = tmp_path / "data.nc"
    path = manifest.format(**bad)
    line = refused(["data", "prepare", "indian_pines", "--manifest", path, "--out", str(out)], capsys, [out])
    assert path in line and says in line, line


def test_check_metadata_unreadable_netcdf(bad: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``report check-metadata`` ending in a netCDF4 OSError traceback on a file under DIR that is not
    netCDF."""
    line = refused(["report", "check-metadata", bad["meta"]], capsys)
    assert str(Path(bad["meta"]) / "x.nc") in line and "not a readable netCDF" in line, line


def test_check_figures_unreadable_png(bad: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``report check-figures`` ending in a PIL traceback on a PNG it cannot identify (an OSError no
    reader translated: cli.main must still print one line naming the file)."""
    line = refused(["report", "check-figures", bad["figs"]], capsys)
    assert str(Path(bad["figs"]) / "x.png") in line, line


NOTEBOOK_CASES = [
    # (--notebook, --params-json, what the line must say)
    ("{empty}", "{{}}", "is empty, not a notebook"),
    ("{garbage}", "{{}}", "is not UTF-8 text"),
    ("{text}", "{{}}", "not a readable notebook"),
    (str(ROOT / "notebooks" / "cost.ipynb"), "[1]", "--params-json must be a JSON object"),
]


@pytest.mark.parametrize(
    ("notebook", "params", "says"), NOTEBOOK_CASES, ids=["empty", "binary", "text", "list"]
)
def test_report_notebook_bad_input(
    notebook: str,
    params: str,
    says: str,
    bad: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches ``report notebook`` ending in an nbformat NotJSONError or a TypeError traceback (an empty or binary
    notebook file, --params-json a JSON list) instead of one line naming the file or the option."""
    out, html = tmp_path / "page.ipynb", tmp_path / "page.html"
    argv = [
        "report",
        "notebook",
        "cost",
        "--notebook",
        notebook.format(**bad),
        "--params-json",
        params.format(),
    ]
    line = refused([*argv, "--out", str(out), "--html", str(html)], capsys, [out, html])
    assert says in line, line
    if "{" in notebook:
        assert notebook.format(**bad) in line, line


# --- the CLI's own contract ---------------------------------------------------------------------------------------
def test_programming_errors_still_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a cli.main that turns every exception into exit 2 (a KeyError or TypeError is a bug: it must keep
    its traceback), while an OSError becomes one line."""
    import hsitp.cli

    def parser_running(exc: BaseException) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="hsitp")
        parser.add_argument("-v", "--verbose", action="store_true")

        def boom(args: argparse.Namespace) -> int:
            raise exc

        parser.set_defaults(func=boom, command="x")
        return parser

    monkeypatch.setattr(hsitp.cli, "build_parser", lambda: parser_running(KeyError("bug")))
    with pytest.raises(KeyError):
        main([])
    monkeypatch.setattr(hsitp.cli, "build_parser", lambda: parser_running(TypeError("bug")))
    with pytest.raises(TypeError):
        main([])
    monkeypatch.setattr(
        hsitp.cli, "build_parser", lambda: parser_running(PermissionError(13, "denied", "/x/y"))
    )
    assert main([]) == 2


def test_one_line_joins_a_multiline_message() -> None:
    """Catches a multi-line HsitpError message reaching the terminal as several lines."""
    msg = "invalid config:\n  a: bad\n  b: worse\n(schema: s.yaml)"
    assert one_line(msg) == "invalid config: a: bad; b: worse (schema: s.yaml)"
    assert one_line("one line") == "one line"


SUBPROCESS_CASES = {
    "empty config": ["cost", "rho", "--out", "{out}", "--config", "{empty}"],
    "garbage netCDF": ["bench", "calibrate", "--microbench", "{garbage}", "--out", "{out}"],
    "config-json list": ["data", "list", "--config-json", "[1]"],
}


@pytest.mark.parametrize("case", list(SUBPROCESS_CASES))
def test_real_stderr_is_one_line(case: str, bad: dict[str, str], tmp_path: Path) -> None:
    """Catches what the in-process runs cannot see: log lines or a traceback Python itself prints around the
    error in a real ``python -m hsitp`` process."""
    out = tmp_path / "out.nc"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "hsitp", *_argv(SUBPROCESS_CASES[case], bad, out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("hsitp: error: "), proc.stderr
    assert not out.exists()
