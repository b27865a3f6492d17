"""pyproject.toml is the one source of the package layout; the wheel and the image build follow it."""

from __future__ import annotations

from tests.layout import ROOT, listed_packages, package_dirs, source_packages


def test_every_package_on_disk_is_listed_for_the_wheel() -> None:
    # editable installs find an unlisted subpackage; the wheel would silently drop it
    assert sorted(listed_packages()) == source_packages()


def test_every_mapped_folder_exists() -> None:
    dirs = package_dirs()
    missing = [f"{name} -> {folder}" for name, folder in dirs.items() if not (ROOT / folder).is_dir()]
    assert missing == []


def test_the_image_build_copies_every_package_folder() -> None:
    dockerfile = (ROOT / "deploy" / "compose" / "Dockerfile").read_text(encoding="utf-8")
    copies = [line.split()[1:] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert copies == [[".", "."]]  # the whole context: no per-package list to forget
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    needed = {*package_dirs().values(), "pyproject.toml", "README.md"}
    assert ignored & needed == set()
