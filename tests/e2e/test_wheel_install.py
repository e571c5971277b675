"""Installed from its wheel, not from the source tree: `pip install` of the built wheel into a fresh virtual
environment, then `tinymemory up` on a folder serves the console and answers `/v1/fetch`.

What the wheel leaves out (a package, the console's templates, the packaged model data, the `tinymemory` entry
point) only shows here: every other test imports the checkout. The wheel's own dependencies are not downloaded
again: the fresh environment sees this environment's site-packages through a `.pth` line, which adds them to
the path without running their `.pth` files, so the checkout's editable install stays invisible.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.fixtures.processes import serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
_NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".tinymemory")


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _setuptools_builds_wheels() -> bool:
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) >= (70, 1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the project installed from a wheel built from this checkout."""
    work = tmp_path_factory.mktemp("wheel")
    # setuptools 70.1 and later build wheels by themselves; an older one is left to pip's isolated build.
    isolation = ["--no-build-isolation"] if _setuptools_builds_wheels() else []
    # Built from a copy: setuptools writes its build folder into the tree it builds.
    source = work / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", work / "dist", source, cwd=work)
    wheel = next((work / "dist").glob("tinymemory_ingest-*.whl"))
    venv = work / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    python = venv / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=work).strip())
    (purelib / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=work)
    return venv


def test_the_wheel_holds_every_package_and_file_it_runs_with(installed: Path, tmp_path: Path) -> None:
    python = installed / "bin" / "python"
    probe = (
        "import importlib.metadata as m, tinymemory_ingest, worker, engines, pipeline, sources;"
        "from tinymemory_ingest.api.console import route;"
        "print(tinymemory_ingest.__file__); print(m.version('tinymemory-ingest'))"
    )
    where, version = _run(python, "-c", probe, cwd=tmp_path).split()
    assert Path(where).is_relative_to(installed), f"imported from {where}, not from the installed wheel"
    assert version != "unknown"
    templates = Path(where).parent / "api" / "console" / "templates"
    assert sorted(p.name for p in templates.glob("*.html")) == sorted(
        p.name for p in (REPO / "tinymemory_ingest" / "api" / "console" / "templates").glob("*.html")
    )


def test_tinymemory_up_from_the_wheel_serves_the_console_and_fetch(installed: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "kiln.md").write_text("# Kiln log\n\nThe glaze firing reached cone six on Tuesday.\n")
    (notes / "garden.md").write_text("# Garden\n\nTomatoes went in after the last frost.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYMEMORY_")}
    env.update(
        TINYMEMORY_DATA_DIR=str(tmp_path / "data"),
        TINYMEMORY_API_PORT="0",
        TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND="static",
        PATH=f"{installed / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    env.pop("PYTHONPATH", None)
    with serving([str(installed / "bin" / "tinymemory"), "up", str(notes)], tmp_path, env) as url:
        console = httpx.get(f"{url}/", timeout=10, follow_redirects=True)
        assert console.status_code == 200 and "text/html" in console.headers["content-type"]
        assert "tinymemory" in console.text.lower()
        answer = httpx.post(
            f"{url}/v1/fetch", json={"query": "glaze firing", "mode": "keyword", "limit": 3}, timeout=10
        )
        assert answer.status_code == 200
        hits = answer.json()["hits"]
        assert [Path(hit["meta"]["file_path"]).name for hit in hits] == ["kiln.md"]
