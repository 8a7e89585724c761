"""Shared pytest fixtures (generic; any stage may add its own here).

- ``repo_root``: the checkout the tests run from.
- ``shared_datasets``: ``../shared/datasets`` (or ``$HSITP_SHARED_DATASETS``); the test is skipped when absent.
- ``loopback_http``: an HTTP server on 127.0.0.1 (port 0) in a thread, serving bytes you register, able to answer
  404, or to cut a response mid-body; download tests use it and never the internet.
- ``workflow_copy``: the workflow copied to a temp folder, with a snakemake runner whose rules find this venv's tools
  and a dry-run helper listing the outputs Snakemake would write.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """The read-only real-data folder; skip (not fail) where a CI setup has no ../shared."""
    path = Path(os.environ.get("HSITP_SHARED_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))
    if not (path / "README.md").is_file():
        pytest.skip(f"{path} absent (real-data tests need ../shared/datasets)")
    return path


@dataclass
class Route:
    data: bytes
    cut_after: int | None = (
        None  # send Content-Length of the full body, then only this many bytes and hang up
    )
    cut_times: int | None = None  # cut only the first n requests (None = every request)
    cuts_done: int = 0


@dataclass
class LoopbackHTTP:
    """Routes by exact path; unknown paths answer 404. ``hits`` records every requested path in order."""

    server: ThreadingHTTPServer
    routes: dict[str, Route] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def serve(
        self, path: str, data: bytes, *, cut_after: int | None = None, cut_times: int | None = None
    ) -> str:
        """Register ``data`` at ``path`` (leading slash optional) and return its full URL."""
        path = "/" + path.lstrip("/")
        self.routes[path] = Route(data, cut_after, cut_times)
        return self.url + path


def _handler(state: LoopbackHTTP) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            state.hits.append(self.path)
            route = state.routes.get(self.path)
            if route is None:
                self.send_error(404, "Not Found")
                return
            cut = route.cut_after is not None and (
                route.cut_times is None or route.cuts_done < route.cut_times
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(route.data)))
            self.end_headers()
            if cut:
                route.cuts_done += 1
                self.wfile.write(route.data[: route.cut_after])
                self.wfile.flush()
                self.close_connection = True  # the client sees EOF before Content-Length bytes
            else:
                self.wfile.write(route.data)

        def log_message(self, format: str, *args: object) -> None:  # silence per-request logging
            pass

    return Handler


@pytest.fixture
def loopback_http(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackHTTP]:
    """A throw-away HTTP server on 127.0.0.1; proxies are bypassed so requests really go to it."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    state = LoopbackHTTP(server=None)  # type: ignore[arg-type]
    state.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.server.daemon_threads = True
    thread = threading.Thread(target=state.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.server.shutdown()
        state.server.server_close()
        thread.join(timeout=5)


@dataclass
class WorkflowCopy:
    """A copy of the workflow in a temp folder, and a runner for snakemake from this venv."""

    root: Path
    env: dict[str, str]

    def snakemake(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        exe = str(Path(sys.executable).with_name("snakemake"))
        return subprocess.run(
            [exe, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout, env=self.env
        )

    def dry_run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A dry run that must succeed; ``jobs`` reads what it plans (one Snakemake start then serves a test that
        checks both the printed lines and the plan)."""
        run = self.snakemake(*args, "--dry-run", timeout=timeout)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        return run

    def planned(self, *args: str, timeout: float = 120) -> dict[str, list[str]]:
        """Dry run: the jobs it plans (``jobs``)."""
        return self.jobs(self.dry_run(*args, timeout=timeout))

    @staticmethod
    def jobs(run: subprocess.CompletedProcess[str]) -> dict[str, list[str]]:
        """{path: [rule, reason]} for every output and log of every job a dry run would run ({} = nothing to do).
        A rule with a ``message:`` (bench_run, probe_run, train) prints only its message: those jobs are keyed by
        the log their message names ("RULE: ...; follow it with: tail -f LOG")."""
        jobs: dict[str, list[str]] = {}
        rule = ""
        outputs: list[str] = []
        for line in run.stdout.splitlines():
            if line.startswith(("rule ", "localrule ")):
                rule, outputs = line.split()[1].rstrip(":"), []
            elif m := re.match(r"Job \d+: (\w+): .*tail -f (\S+)$", line):
                rule, outputs = m.group(1), [m.group(2)]
            elif line.strip().startswith(("output:", "log:")):
                outputs += [o.strip() for o in line.split(":", 1)[1].split(",")]
            elif line.strip().lower().startswith("reason:"):
                jobs.update({o: [rule, line.split(":", 1)[1].strip()] for o in outputs})
        if not jobs:
            assert "Nothing to be done" in run.stdout + run.stderr, run.stdout[-3000:]
        return jobs


@pytest.fixture
def workflow_copy(repo_root: Path, tmp_path: Path) -> WorkflowCopy:
    """Snakefile, rules, configs, envs, notebooks, src and the committed reference copied to tmp_path; Snakemake
    runs with this venv's bin folder taken off PATH, as a user who did not activate the venv has it: the workflow
    must put it back itself (common.smk) for its rules to find this venv's `hsitp`."""
    # rules also read notebooks/, the report and audit code (rendering inputs) and the committed reference
    sources = ("Snakefile", "workflow", "profiles", "config", "envs", "notebooks", "src", "results/reference")
    for item in sources:
        src = repo_root / item
        if src.is_dir():
            shutil.copytree(src, tmp_path / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(src, tmp_path / item)
    bindir = str(Path(sys.executable).parent)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d != bindir)
    return WorkflowCopy(tmp_path, {**os.environ, "PATH": path})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-dir",
        default=None,
        help="results/RUN of a finished run for tests/test_run_outputs.py (default: small synthetic stage files)",
    )
    parser.addoption(
        "--workflow-dir",
        default=None,
        help="a folder where the smoke DAG has finished, for tests/test_workflow_run.py (default: those tests skip)",
    )
    parser.addoption(
        "--workflow-config",
        action="append",
        default=[],
        help="a config file the finished run used after config/smoke.yaml (repeatable; relative to --workflow-dir)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist (3.6 and later) reorders --dist loadfile's files by their number of tests, most first: the
    order below then never reached the workers, and the files of two or three long tests (the Snakemake runs, the
    parity worlds) were handed out last, one worker finishing them alone."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a `slow` test (a spawned group, a Snakemake run) first, those with the most slow tests first,
    each file's tests kept together and in order: under `-n auto --dist loadfile` the workers start on the long
    files and the short ones fill the tail, instead of one worker finishing a Snakemake run alone at the end."""
    slow: dict[Path, int] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            slow[item.path] = slow.get(item.path, 0) + 1
    items.sort(key=lambda item: -slow.get(item.path, 0))  # stable: file and test order kept otherwise
