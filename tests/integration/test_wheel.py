"""The wheel holds every package and data file, and works installed, outside the checkout.

The wheel is built offline (no build isolation: setuptools and wheel come from the dev extras)
from a copy of the sources, so the checkout gets no build/ or egg-info. The install goes into a
fresh venv whose only extra path is the project environment's site-packages, for the third-party
dependencies: lanewatch itself comes from the wheel alone.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.layout import ROOT, listed_packages, package_data, package_dirs

pytestmark = pytest.mark.integration
PIP = (sys.executable, "-m", "pip")


def _copy_sources(dest: Path) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in package_dirs().values():
        shutil.copytree(ROOT / folder, dest / folder, ignore=skip)


def test_makefile_reads_the_mapping_from_pyproject() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    probe = "print-pkg-dirs:\n\t@echo $(PKG_DIRS)\n"
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "print-pkg-dirs"],
        cwd=ROOT,
        input=probe,
        capture_output=True,
        text=True,
        check=True,
    )
    pairs = dict(p.split("=", 1) for p in result.stdout.split())
    assert pairs == package_dirs()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lanewatch's wheel, built from a copy of this checkout."""
    src = tmp_path_factory.mktemp("src")
    _copy_sources(src)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (built,) = dist.glob("lanewatch-*.whl")
    return built


def _package_folder(package: str) -> Path:
    """The source folder of a listed package (lanewatch.collector.cli -> collector/cli)."""
    for name, folder in package_dirs().items():
        if package == name or package.startswith(f"{name}."):
            return ROOT / folder / package.removeprefix(name).lstrip(".").replace(".", "/")
    raise AssertionError(f"{package} is under no package-dir mapping")


def _expected_files() -> set[str]:
    """Every module of every listed package, and every file its package-data patterns match."""
    expected = set()
    for package in listed_packages():
        folder = _package_folder(package)
        prefix = package.replace(".", "/")
        expected |= {f"{prefix}/{p.name}" for p in folder.glob("*.py")}
        for pattern in package_data().get(package, []):
            matches = [p for p in folder.glob(pattern) if p.is_file() and "__pycache__" not in p.parts]
            assert matches, f"{package}: package-data pattern {pattern!r} matches nothing"
            expected |= {f"{prefix}/{p.relative_to(folder).as_posix()}" for p in matches}
    return expected


def test_the_wheel_holds_every_package_and_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = {n for n in zf.namelist() if not fnmatch.fnmatch(n, "lanewatch-*.dist-info/*")}
    expected = _expected_files()
    assert expected - names == set()
    assert names - expected == set()  # nothing the layout does not declare
    assert "lanewatch/deploy/prometheus/prometheus.yml" in names
    assert "lanewatch/alerts/generated/lanewatch-rules.yml" in names


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv with the wheel installed."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    python = home / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # third-party dependencies only: a path from a .pth line gets none of its own .pth files
    # processed, so the project environment's editable lanewatch stays invisible
    (Path(site) / "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    return home / "bin"


def _run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_lanewatch_comes_from_the_install_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    code = (
        "import lanewatch.alerts, lanewatch.collector.demo.configs as c; "
        "print(lanewatch.alerts.__file__); print(c.DEPLOY_DIR); print(c.DEMO_RULES)"
    )
    result = _run(installed, tmp_path, "python", "-c", code)
    assert result.returncode == 0, result.stderr
    paths = [Path(line) for line in result.stdout.splitlines()]
    assert len(paths) == 3
    for path in paths:
        assert path.is_relative_to(installed.parent), path
        assert not path.resolve().is_relative_to(ROOT), path
    assert (paths[1] / "prometheus" / "prometheus.yml").is_file()
    assert paths[2].is_file()


def test_alerts_build_out_matches_the_committed_rules(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "rules"
    result = _run(installed, tmp_path, "lanewatch", "alerts", "build", "--out", str(out))
    assert result.returncode == 0, result.stderr
    committed = sorted((ROOT / "alerts" / "generated").glob("*.yml"))
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in committed]
    for path in committed:
        assert (out / path.name).read_text() == path.read_text(), path.name


def test_dashboards_build_out_matches_the_committed_dashboards(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "dashboards"
    result = _run(installed, tmp_path, "lanewatch", "dashboards", "build", "--out", str(out))
    assert result.returncode == 0, result.stderr
    committed = sorted((ROOT / "dashboards" / "generated").glob("*.json"))
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in committed]
    for path in committed:
        assert (out / path.name).read_text() == path.read_text(), path.name


@pytest.mark.parametrize("command", ["alerts", "dashboards"])
def test_build_without_out_says_to_pass_one(installed: Path, tmp_path: Path, command: str) -> None:
    result = _run(installed, tmp_path, "lanewatch", command, "build")
    assert result.returncode == 2
    assert "pass --out DIR" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_demo_help_runs_installed(installed: Path, tmp_path: Path) -> None:
    result = _run(installed, tmp_path, "lanewatch", "demo", "--help")
    assert result.returncode == 0, result.stderr
    assert "--out" in result.stdout
