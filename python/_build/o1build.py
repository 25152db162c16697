"""A PEP 517 build backend for o1client, standard library only.

o1client is pure Python, so its wheel is the package's files plus the
dist-info (METADATA, WHEEL, RECORD); writing that here, rather than
asking for setuptools, lets pip install ./python without fetching
anything (pip's build isolation would otherwise download setuptools).
Hooks: build_wheel, build_sdist, build_editable (a .pth file naming this
folder) and their get_requires_* (nothing).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "o1client"
SUMMARY = ("Python client of the o1d inference daemon "
           "(shared-memory rings through libo1client)")
REQUIRES_PYTHON = ">=3.9"
TAG = "py3-none-any"


def _version():
    text = (ROOT / NAME / "_version.py").read_text(encoding="utf-8")
    so = re.search(r"^SOVERSION = (\d+)$", text, re.M)
    v = re.search(r'^__version__ = f"\{SOVERSION\}(\.\d+\.\d+)"$', text,
                  re.M)
    if not so or not v:
        raise RuntimeError("cannot read the version from _version.py")
    return so.group(1) + v.group(1)


def _metadata():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            f"Summary: {SUMMARY}\nRequires-Python: {REQUIRES_PYTHON}\n"
            "Provides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _package_files():
    for p in sorted((ROOT / NAME).rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and \
                p.suffix not in (".pyc", ".pyo"):
            yield p.relative_to(ROOT).as_posix(), p.read_bytes()


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "sha256=" + h.rstrip(b"=").decode()


def _write_wheel(directory, files):
    dist = f"{NAME}-{_version()}"
    info = f"{dist}.dist-info"
    files = list(files) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: o1build\n"
                           f"Root-Is-Purelib: true\nTag: {TAG}\n").encode()),
    ]
    name = f"{dist}-{TAG}.whl"
    record = [f"{path},{_digest(data)},{len(data)}" for path, data in files]
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0)), data,
                       zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    pth = (str(ROOT) + "\n").encode()
    return _write_wheel(wheel_directory, [(f"{NAME}_editable.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):
    dist = f"{NAME}-{_version()}"
    name = f"{dist}.tar.gz"
    members = list(_package_files())
    for extra in ("pyproject.toml", "README.md", "_build/o1build.py"):
        members.append((extra, (ROOT / extra).read_bytes()))
    members.append(("PKG-INFO", _metadata().encode()))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for path, data in members:
            ti = tarfile.TarInfo(f"{dist}/{path}")
            ti.size = len(data)
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    return name
