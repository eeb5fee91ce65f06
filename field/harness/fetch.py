"""Real data from the registries, downloaded once: Debian source packages (`apt-get source --download-only`) and
PyPI sdists (`pip download --no-binary :all:`), kept in a cache directory that later runs only read."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.sh import Env, FieldError

CACHE_VAR = "STACKMGR_FIELD_CACHE"
COMPLETE = ".complete"  # written last: a directory without it is a download that did not finish


def default_cache() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "stackmgr-field")


@dataclass(frozen=True)
class DebianSource:
    package: str
    version: str
    orig: Path  # the pristine upstream tarball
    debian: Path  # debian.tar.*: debian/patches/ and its series


@dataclass
class Cache:
    root: Path
    downloads: int = 0  # how many fetches this run made (a warm run makes none)

    def _fetch(self, kind: str, name: str, env: Env, argv: list[str]) -> Path:
        where = self.root / kind / name
        if (where / COMPLETE).exists():
            return where
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        done = env.run(argv, where)
        if done.code != 0:
            shutil.rmtree(where, ignore_errors=True)
            raise FieldError(f"could not download {name} ({' '.join(argv[:3])}…): {done.text.strip()[-300:]}")
        (where / COMPLETE).write_text("")
        self.downloads += 1
        return where

    def debian(self, package: str, env: Env) -> DebianSource:
        where = self._fetch("debian", package, env, ["apt-get", "source", "-qq", "--download-only", package])
        dscs = sorted(where.glob(f"{package}_*.dsc"))
        if len(dscs) != 1:
            raise FieldError(f"{where}: expected one {package}_*.dsc, found {len(dscs)}")
        text = dscs[0].read_text(errors="replace")
        version = re.search(r"^Version: (\S+)", text, re.M)
        if not re.search(r"^Format: 3\.0 \(quilt\)", text, re.M) or version is None:
            raise FieldError(f"{dscs[0].name} is not a 3.0 (quilt) source package")
        files = sorted(set(re.findall(r"^ [0-9a-f]{32,} \d+ (\S+)$", text, re.M)))
        orig = [where / f for f in files if re.search(r"\.orig\.tar\.[a-z0-9]+$", f)]
        debian = [where / f for f in files if re.search(r"\.debian\.tar\.[a-z0-9]+$", f)]
        if len(orig) != 1 or len(debian) != 1 or not orig[0].exists() or not debian[0].exists():
            raise FieldError(f"{dscs[0].name}: expected one orig and one debian tarball in {where}")
        return DebianSource(package, version.group(1), orig[0], debian[0])

    def sdist(self, project: str, version: str, env: Env) -> Path:
        where = self._fetch("pypi", f"{project}-{version}", env,
                            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                             f"{project}=={version}", "-d", "."])  # fmt: skip
        found = [p for p in where.iterdir() if p.name.endswith((".tar.gz", ".zip", ".tar.bz2"))]
        if len(found) != 1:
            raise FieldError(f"{where}: expected one sdist, found {[p.name for p in found]}")
        return found[0]


def extract(tarball: Path, dest: Path, strip_top: bool = True) -> Path:
    """Unpack a source tarball into `dest`, without its single top directory when it has one (and `strip_top`)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
        tops = {m.name.split("/", 1)[0] for m in members if m.name not in (".", "./")}
        strip = strip_top and len(tops) == 1 and any("/" in m.name.strip("/") for m in members)
        for m in members:
            parts = m.name.split("/")
            rel = "/".join(parts[1:] if strip else parts).strip("/")
            if not rel or rel.startswith("..") or "/../" in f"/{rel}/" or m.isdev():
                continue
            m.name = rel
            if m.islnk():
                linked = m.linkname.split("/")
                m.linkname = "/".join(linked[1:] if strip else linked)
            tar.extract(m, dest, set_attrs=not m.isdir(), filter="tar")
    return dest
