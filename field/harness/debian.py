"""Debian source packages: the pristine upstream tree with its debian/patches series brought in by stackmgr
(`import` + `apply`) and by `quilt push -a`; the series exported back to quilt; and the same series as
`git format-patch` mails, brought in by stackmgr and by `git am`."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.cases import Result, Side
from harness.fetch import Cache, DebianSource, extract
from harness.sh import Env, FieldError, clone_at, commit_all, new_repo, worktree_id

# 1..63 patches each, small downloads (< 15 MB); DEP-3 headers, git format-patch mails (patch, cpio; openssh's
# and rsync's whole series, gbp pq style), plain diff -u, patches that create files (cowsay, dash, patch, xz-utils)
# and delete one (cowsay), series with comments (screen) and with patches in subdirectories (rsync), patches to files
# the tarball's own .gitignore names (rsync's aclocal.m4), an empty patch (procps' ps_checks), security fixes of
# stable updates (sudo, wget, tar), a creation hunk without /dev/null against a file upstream has already (zsh's
# completion-dscverify.diff), a trimmed diffstat (jq's CVE backport), two mail headers above one diff (libwebp), a
# hunk at line 1 under a new line on top (bluez), a series with a plain-diff mail (libtasn1-6).
PACKAGES = ("bc", "bzip2", "cowsay", "cpio", "dash", "gzip", "less", "nano", "patch", "screen", "xz-utils", "grep",
            "openssh", "rsync", "zsh", "tar", "coreutils", "procps", "sudo", "wget", "jq", "libwebp", "bluez",
            "libtasn1-6")  # fmt: skip
SERIES = "debian"
MAIL = re.compile(rb"From [0-9a-f]{40} ")  # the first line of a git format-patch mail


@dataclass(frozen=True)
class Unpacked:
    source: DebianSource
    repo: Path  # git repository: one commit of the orig tarball
    base: str
    patches: Path  # debian/patches (with its series file)


def unpack(env: Env, cache: Cache, package: str, work: Path) -> Unpacked:
    source = cache.debian(package, env)
    repo = extract(source.orig, new_repo(env, work / "orig"))
    base = commit_all(env, repo, f"{package} {source.version}: pristine upstream tarball")
    extract(source.debian, work / "debian-tar", strip_top=False)
    patches = work / "debian-tar" / "debian" / "patches"
    if not (patches / "series").exists():
        raise FieldError(f"{package}: no debian/patches/series")
    return Unpacked(source, repo, base, patches)


def series_names(patches: Path) -> list[str]:
    """The patch names of a quilt series file, in order (comments, blank lines and options left out)."""
    names = []
    for line in (patches / "series").read_text(errors="replace").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            names.append(words[0])
    return names


def quilt_push_all(env: Env, u: Unpacked, patches: Path, where: Path) -> Side:
    tree = clone_at(env, u.repo, where, u.base)
    done = env.quilt(tree, patches, where.parent / f"{where.name}.pc", "push", "-a", "-q")
    if done.code != 0:
        return Side("quilt push -a", None, last_line(done.text))
    return Side("quilt push -a", worktree_id(env, tree))


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:160] if lines else "no output"


def new_store(env: Env, where: Path, tree_name: str, tree: Path) -> Path:
    store = where / "store"
    env.must([env.stackmgr, "init", str(store)], where)
    env.must([env.stackmgr, "--store", str(store), "tree", "add", tree_name, str(tree)], where)
    return store


def stackmgr_import_apply(env: Env, u: Unpacked, where: Path, inputs: list[str], extra: list[str]) -> tuple[
        Side, Path, list[str]]:  # fmt: skip
    """`stackmgr import INPUTS… --series debian` + `stackmgr apply debian` in a fresh store and clone."""
    where.mkdir(parents=True)
    tree = clone_at(env, u.repo, where / "tree", u.base)
    store = new_store(env, where, u.source.package, tree)
    done = env.sm(store, "import", "--json", "--series", SERIES, *extra, *inputs)
    detail = import_detail(done.out)
    if done.code != 0:
        refused = [d for d in detail if not d.endswith(": imported")]
        return Side("stackmgr", None, f"import exit {done.code}: {refused[0] if refused else last_line(done.text)}"), \
            store, detail  # fmt: skip
    applied = env.sm(store, "apply", SERIES)
    if applied.code != 0:
        return Side("stackmgr", None, f"apply exit {applied.code}: {last_line(applied.text)}"), store, detail
    return Side("stackmgr", worktree_id(env, tree)), store, detail


def import_detail(out: bytes) -> list[str]:
    try:
        data = json.loads(out)
    except ValueError:
        return []
    lines = []
    for item in data.get("imported", []) + data.get("refused", []):
        why = item.get("reason") or item.get("outcome") or ""
        lines.append(f"{Path(str(item.get('source', item.get('name', '?')))).name}: {why}")
    return lines


def debian_cases(env: Env, cache: Cache, package: str, work: Path) -> list[Result]:
    """Results for one package: debian (import + apply vs quilt push -a), export (export --quilt, then quilt push
    -a; export --mbox, then git am: each vs the Debian series by quilt), am (format-patch mails: import + apply vs
    git am; and the package's own mails, when its series is git format-patch mails)."""
    u = unpack(env, cache, package, work)
    n = len(series_names(u.patches))
    case = f"{package} {u.source.version} ({n} patches)"
    quilt = quilt_push_all(env, u, u.patches, work / "quilt")
    mine, store, detail = stackmgr_import_apply(env, u, work / "sm", [str(u.patches)], [])
    results = [Result("debian", case, mine, quilt, detail)]

    exported = work / "exported"
    if mine.failed:
        back = Side("export + quilt push -a", None, "nothing to export: the import failed")
    else:
        done = env.sm(store, "export", SERIES, "--quilt", str(exported))
        back = quilt_push_all(env, u, exported, work / "quilt-export") if done.code == 0 else \
            Side("export + quilt push -a", None, f"export exit {done.code}: {last_line(done.text)}")  # fmt: skip
    results.append(Result("export", case, Side("export + quilt push -a", back.tree, back.note), quilt))
    results.append(Result("export", f"{case[: case.index(' (')]} (--mbox, git am)", mbox_round_trip(env, u, store,
                          work, mine.failed), quilt))  # fmt: skip
    results.append(am_case(env, u, work, case))
    own = [u.patches / name for name in series_names(u.patches)]
    if all(MAIL.match(p.read_bytes()[:60]) for p in own):  # the series is git format-patch mails already
        results.append(am_case(env, u, work / "own", case, own))
    return results


def mbox_round_trip(env: Env, u: Unpacked, store: Path, work: Path, nothing: bool) -> Side:
    """`stackmgr export debian --mbox FILE`, then `git am --keep-cr FILE` on the pristine tree."""
    if nothing:
        return Side("export --mbox + git am", None, "nothing to export: the import failed")
    mbox = work / "exported.mbox"
    done = env.sm(store, "export", SERIES, "--mbox", str(mbox))
    if done.code != 0:
        return Side("export --mbox + git am", None, f"export exit {done.code}: {last_line(done.text)}")
    tree = clone_at(env, u.repo, work / "am-export", u.base)
    done = env.run(["git", "am", "-q", "--keep-cr", str(mbox)], tree)
    if done.code != 0:
        return Side("export --mbox + git am", None, f"git am: {last_line(done.text)}")
    return Side("export --mbox + git am", worktree_id(env, tree))


def mails_from_quilt(env: Env, u: Unpacked, work: Path) -> tuple[list[Path], int]:
    """The series as commits (one `quilt push` and one commit per patch, its DEP-3 subject as the message),
    then `git format-patch`: the mails a maintainer would send. Stops at the first patch quilt refuses. A patch
    that changes nothing (procps' empty ps_checks) is an empty commit, whose mail git 2.39 writes as a 0-byte file
    (newer git: a mail without a diff), as in a branch with an empty "Initial plan" commit."""
    tree = clone_at(env, u.repo, work / "commits", u.base)
    pc = work / "commits.pc"
    for name in series_names(u.patches):
        if env.quilt(tree, u.patches, pc, "push", "-q").code != 0:
            break
        env.must(["git", "add", "-A", "-f"], tree)
        env.must(["git", "commit", "-q", "--no-verify", "--allow-empty", "-m", subject_of(u.patches / name, name)],
                 tree)  # fmt: skip
    out = work / "mails"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(out), f"{u.base}..HEAD"], tree)
    return sorted(out.glob("*.patch")), len(series_names(u.patches))


def git_am_takes(mails: list[Path]) -> list[Path]:
    """The mails `git am` is given: an empty commit's (no diff) is left out, as `git am --skip` leaves it (git
    2.39's `git am` stops at it: "empty mbox", or "No valid patches in input" even with --empty=drop)."""
    return [m for m in mails if re.search(rb"^(?:diff --git |--- \S)", m.read_bytes(), re.M)]  # a plain diff too


def subject_of(patch: Path, name: str) -> str:
    head = patch.read_bytes()[:4000].decode(errors="replace")
    m = re.search(r"^(?:Subject|Description):[ \t]*(?:\[PATCH[^]]*\][ \t]*)?(.+)$", head, re.M | re.I)
    subject = m.group(1).strip() if m else ""
    return f"{subject or name}\n\nDebian patch {name}\n"


def am_case(env: Env, u: Unpacked, work: Path, case: str, own: list[Path] | None = None) -> Result:
    """`git am` vs `stackmgr import` + `apply` of the series made into mails, or of the package's own mails."""
    work.mkdir(parents=True, exist_ok=True)
    mails = own or mails_from_quilt(env, u, work)[0]
    if not mails:
        raise FieldError(f"{u.source.package}: no mails from the quilt series")
    am_tree = clone_at(env, u.repo, work / "am", u.base)
    done = env.run(["git", "am", "-q", "--keep-cr", *map(str, git_am_takes(mails))], am_tree)
    am = Side("git am", None, last_line(done.text)) if done.code != 0 else Side("git am", worktree_id(env, am_tree))
    if done.code != 0:
        env.run(["git", "am", "--abort"], am_tree)
    mine, _, detail = stackmgr_import_apply(env, u, work / "sm-am", [str(m) for m in mails], ["--base", u.base])
    kind = "Debian's own mails" if own else "mails"
    return Result("am", f"{case[: case.index(' (')]} ({len(mails)} {kind})", mine, am, detail)


def run_package(env: Env, cache: Cache, package: str, work: Path) -> list[Result]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return debian_cases(env, cache, package, work)
