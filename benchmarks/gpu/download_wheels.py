"""Download the wheels the GPU device machine lacks into ``.whl/`` (ignored by git).

The device (one H200, Python 3.12, no network) has torch, triton, transformers, numpy and the
packages in ``device_packages.txt``, but not radixlm's wire/serving dependencies. Those travel
as wheels: ``run_device.sh`` installs them into ``/tmp/site`` there. Versions are pinned to what
the development venv runs, for CPython 3.12 on manylinux x86_64.

    python benchmarks/gpu/download_wheels.py            # into ./.whl (repository root)
    python benchmarks/gpu/download_wheels.py --dest DIR
    python benchmarks/gpu/download_wheels.py --list     # print the pins, download nothing

After downloading, every wheel's ``Requires-Dist`` (extras skipped, markers evaluated for
CPython 3.12 on Linux) is checked against the carried set plus the device's package list;
anything uncovered is an error. Total size is printed (the device call carries at most 64 MiB).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEVICE_PACKAGES_FILE = HERE / "device_packages.txt"
PYTHON_VERSION = "3.12"
# pip matches each manylinux tag exactly, so name every glibc level the wheels use.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
MAX_TOTAL_BYTES = 64 << 20  # what one device call may carry, the working tree included


def canonical(name: str) -> str:
    """PEP 503 normalisation: lower case, runs of -_. become one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Wheel:
    """One pinned distribution and why it travels."""

    name: str  # canonical (PEP 503) name
    version: str
    why: str

    def __post_init__(self) -> None:
        if canonical(self.name) != self.name:
            raise ValueError(f"wheel name {self.name!r} is not canonical "
                             f"({canonical(self.name)!r})")
        if not re.fullmatch(r"\d+(\.\d+)*", self.version):
            raise ValueError(f"{self.name}: version {self.version!r} is not an exact release")

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


WHEELS: tuple[Wheel, ...] = (
    # radixlm's own runtime dependencies missing on the device
    Wheel("msgspec", "0.23.0", "wire protocol"),
    Wheel("pyzmq", "27.3.0", "process sockets"),
    Wheel("outlines-core", "0.2.14", "runtime dependency (pyproject)"),
    Wheel("interegular", "0.3.3", "runtime dependency (pyproject)"),
    Wheel("jsonschema", "4.26.0", "fsm: JSON Schema validation"),
    Wheel("fastapi", "0.165.0", "HTTP server"),
    Wheel("uvicorn", "0.54.0", "HTTP server"),
    Wheel("pydantic", "2.14.4", "OpenAI API models (also fastapi)"),
    Wheel("gguf", "0.19.0", "GGUF checkpoints (model loading)"),
    # their dependencies missing on the device
    Wheel("pydantic-core", "2.50.5", "pydantic pins it exactly"),
    Wheel("annotated-types", "0.8.0", "pydantic"),
    Wheel("typing-inspection", "0.4.5", "pydantic, fastapi"),
    Wheel("starlette", "1.10.0", "fastapi"),
    Wheel("opentelemetry-api", "1.45.2", "fastapi"),
    Wheel("referencing", "0.37.0", "jsonschema"),
    Wheel("jsonschema-specifications", "2025.9.1", "jsonschema"),
    Wheel("rpds-py", "2026.9.1", "jsonschema, referencing"),
    # on the device, but its version there is unknown and pydantic-core needs >= 4.16.0:
    # carried so the import cannot fail on an older copy (newer is backward compatible).
    Wheel("typing-extensions", "4.16.0", "version floor of pydantic, pydantic-core, anyio"),
)

# Runtime dependencies of radixlm (pyproject) that the device already has, or that are left
# behind on purpose: their name -> why no wheel travels.
NOT_CARRIED = {
    "torch": "on the device (2.11 + CUDA)",
    "triton": "on the device (3.6)",
    "jsonschema[format-nongpl]": "format extras are optional; jsonschema skips absent checkers",
}


def device_packages(path: Path = DEVICE_PACKAGES_FILE) -> frozenset[str]:
    """Canonical names of the packages on the device image (comments and blanks skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return frozenset(canonical(line) for line in lines if line)


def pip_download_command(dest: Path, wheels: tuple[Wheel, ...] = WHEELS,
                         python: str = sys.executable) -> list[str]:
    """One ``pip download`` of exactly ``wheels``: binary only, no dependency resolution."""
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", PYTHON_VERSION, "--implementation", "cp", "--abi", "cp312",
           "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    return [*cmd, "-d", str(dest), *(w.pin for w in wheels)]


def requirement_names(requires_dist: list[str]) -> set[str]:
    """Canonical names a wheel needs on CPython 3.12 / Linux (extras and other markers out)."""
    from packaging.requirements import Requirement

    env = {"python_version": PYTHON_VERSION, "python_full_version": f"{PYTHON_VERSION}.3",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
           "platform_machine": "x86_64", "extra": ""}
    names = set()
    for line in requires_dist:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            names.add(canonical(req.name))
    return names


def wheel_metadata(path: Path) -> tuple[str, str, list[str]]:
    """(canonical name, version, Requires-Dist lines) from a wheel's METADATA."""
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    header = text.split("\n\n", 1)[0].splitlines()
    field = {k: [line.split(":", 1)[1].strip() for line in header
                 if line.startswith(k + ":")] for k in ("Name", "Version", "Requires-Dist")}
    return canonical(field["Name"][0]), field["Version"][0], field["Requires-Dist"]


def uncovered(requires: dict[str, set[str]], available: set[str] | frozenset[str]
              ) -> dict[str, set[str]]:
    """For each wheel, the needed names neither carried nor on the device."""
    missing = {name: needs - available for name, needs in requires.items()}
    return {name: needs for name, needs in missing.items() if needs}


def check_downloaded(dest: Path, wheels: tuple[Wheel, ...] = WHEELS) -> list[str]:
    """Problems with the wheels in ``dest``: missing, duplicated, unexpected or uncovered."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for path in sorted(dest.glob("*.whl")):
        name, version, requires = wheel_metadata(path)
        found.setdefault(name, []).append((version, requires))
    problems = [f"{name}: {len(v)} wheels (keep one: two stop the install)"
                for name, v in found.items() if len(v) > 1]
    pins = {w.name: w.version for w in wheels}
    problems += [f"{n}: wheel not in {dest}" for n in pins if n not in found]
    problems += [f"{n}: wheel in {dest} is not in the pinned list" for n in found
                 if n not in pins]
    problems += [f"{n}: downloaded {v[0][0]}, pinned {pins[n]}" for n, v in found.items()
                 if n in pins and v[0][0] != pins[n]]
    requires = {n: requirement_names(v[0][1]) for n, v in found.items()}
    for name, needs in uncovered(requires, set(found) | device_packages()).items():
        problems.append(f"{name} needs {sorted(needs)}: neither carried nor on the device")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".whl")
    parser.add_argument("--list", action="store_true", help="print the pins and exit")
    args = parser.parse_args(argv)
    if args.list:
        for w in WHEELS:
            print(f"{w.pin:36} {w.why}")
        return 0
    args.dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(pip_download_command(args.dest), check=True)
    problems = check_downloaded(args.dest)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    files = sorted(args.dest.glob("*.whl"))
    total = sum(f.stat().st_size for f in files)
    for f in files:
        print(f"{f.stat().st_size / 1024:9.0f} KiB  {f.name}")
    print(f"{len(files)} wheels, {total / (1 << 20):.1f} MiB in {args.dest}")
    if total > MAX_TOTAL_BYTES:
        print(f"error: over the {MAX_TOTAL_BYTES >> 20} MiB a device call carries",
              file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
