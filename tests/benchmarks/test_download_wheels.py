"""benchmarks/gpu/download_wheels.py carries a consistent set: every wheel's needs are carried
or on the device, radixlm's runtime dependencies are all accounted for (no network here)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "download_wheels", ROOT / "benchmarks" / "gpu" / "download_wheels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building
    spec.loader.exec_module(module)
    return module


dw = _load()


def test_pins_are_unique_and_exact() -> None:
    names = [w.name for w in dw.WHEELS]
    assert len(names) == len(set(names)), "one version of each: two stop the install"
    assert all(w.version[0].isdigit() for w in dw.WHEELS)
    with pytest.raises(ValueError, match="not canonical"):
        dw.Wheel("Pydantic_Core", "1.0", "x")
    with pytest.raises(ValueError, match="exact release"):
        dw.Wheel("msgspec", ">=0.18", "x")


def test_device_list_is_read_and_excludes_what_is_carried() -> None:
    device = dw.device_packages()
    assert {"torch", "triton", "transformers", "numpy", "safetensors"} <= device
    carried_only = {w.name for w in dw.WHEELS} - {"typing-extensions"}
    assert not carried_only & device, "a wheel duplicates a package the device already has"


def test_every_runtime_dependency_is_carried_on_the_device_or_explained() -> None:
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    available = {w.name for w in dw.WHEELS} | dw.device_packages()
    for line in deps:
        req = Requirement(line)
        name = dw.canonical(req.name)
        if req.extras:
            assert f"{req.name}[{','.join(sorted(req.extras))}]" in dw.NOT_CARRIED, line
        assert name in available or name in dw.NOT_CARRIED, f"{line}: no wheel and not there"


@pytest.mark.parametrize("wheel", dw.WHEELS, ids=lambda w: w.name)
def test_installed_requirements_are_covered(wheel) -> None:
    """Where this venv has the pinned version, its real metadata needs nothing uncovered."""
    try:
        dist = importlib.metadata.distribution(wheel.name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{wheel.name} is not installed here")
    if dist.version != wheel.version:
        pytest.skip(f"{wheel.name}: installed {dist.version}, pinned {wheel.version}")
    needs = dw.requirement_names(dist.requires or [])
    available = {w.name for w in dw.WHEELS} | dw.device_packages()
    assert needs <= available, f"{wheel.name} needs {sorted(needs - available)}"


def test_requirement_markers_are_evaluated_for_cpython_312_linux() -> None:
    names = dw.requirement_names([
        'cffi; implementation_name == "pypy"', 'exceptiongroup>=1; python_version < "3.11"',
        "typing-extensions>=4.10; python_version < '3.13'", 'rich; extra == "cli"',
        "Annotated_Types>=0.6",
    ])
    assert names == {"typing-extensions", "annotated-types"}


def test_pip_command_fetches_exactly_the_pins_as_cp312_binaries(tmp_path: Path) -> None:
    cmd = dw.pip_download_command(tmp_path, python="python3")
    assert cmd[:4] == ["python3", "-m", "pip", "download"]
    for flag in ("--no-deps", "--only-binary=:all:"):
        assert flag in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.12"
    assert cmd[cmd.index("-d") + 1] == str(tmp_path)
    pins = [a for a in cmd if "==" in a]
    assert pins == [w.pin for w in dw.WHEELS]
    assert all(p.endswith("_x86_64") for p in cmd[1:] if "manylinux" in p)


def _fake_wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    dist = name.replace("-", "_")
    meta = "\n".join([f"Name: {name}", f"Version: {version}",
                      *(f"Requires-Dist: {r}" for r in requires)]) + "\n\nlong description"
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", "Metadata-Version: 2.1\n" + meta)


def test_check_downloaded_names_each_problem(tmp_path: Path) -> None:
    pins = (dw.Wheel("alpha", "1.0", "x"), dw.Wheel("beta", "2.0", "x"),
            dw.Wheel("gamma", "3.0", "x"))
    _fake_wheel(tmp_path, "alpha", "1.0", ["beta>=1", "torch", "nowhere-pkg; extra == 'x'"])
    _fake_wheel(tmp_path, "beta", "2.1", ["nowhere-pkg>=1"])
    _fake_wheel(tmp_path, "delta", "1.0", [])
    problems = dw.check_downloaded(tmp_path, pins)
    assert "gamma: wheel not in" in " ".join(problems)
    assert any(p.startswith("delta: wheel in") for p in problems)
    assert "beta: downloaded 2.1, pinned 2.0" in problems
    assert any(p.startswith("beta needs ['nowhere-pkg']") for p in problems)
    assert not any(p.startswith("alpha needs") for p in problems)  # torch is on the device


def test_check_downloaded_refuses_two_versions(tmp_path: Path) -> None:
    pins = (dw.Wheel("alpha", "1.0", "x"),)
    _fake_wheel(tmp_path, "alpha", "1.0", [])
    _fake_wheel(tmp_path, "alpha", "1.1", [])
    assert "alpha: 2 wheels (keep one: two stop the install)" in dw.check_downloaded(
        tmp_path, pins)
