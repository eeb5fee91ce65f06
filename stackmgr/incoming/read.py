"""What `stackmgr import` is given, read and checked before any git work: `git format-patch` mails (one per file,
or an mbox of several), quilt patches with DEP-3 or free-text headers, plain `diff -u`/`diff -ruN` output, and
whole quilt directories (`series` + patch files). Each patch comes out as an `Incoming` (description, author,
date, the diff bytes, the strip level) or as a `Refused` with the reason; one bad file never stops the others.

Bytes stay bytes: the diff part is never decoded. Only the description is read as text.
"""

from __future__ import annotations

import os
import re
import stat

from stackmgr.errors import StackmgrError
from stackmgr.incoming.descriptions import describe
from stackmgr.incoming.empty import GIT_AM_EMPTY, diff_start, empty_patch
from stackmgr.incoming.mime import decoded
from stackmgr.incoming.names import file_name, git_header_names, header_strip
from stackmgr.store import patchfile
from stackmgr.store.inside import OutsideStore, is_link_inside

# A message separator of an mbox: git format-patch's magic line, or a classic `From sender date` line.
_MBOX_FROM = re.compile(rb"^From (?:[0-9a-f]{40} Mon Sep 17 00:00:00 2001|\S+ +\w{3} \w{3} [ \d]\d .*)$", re.M)
_HUNK = re.compile(rb"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_STAT_FILES = re.compile(rb"\n (\d+) files? changed")
_SECTION_BODY = re.compile(rb"^(?:@@ |GIT binary patch|Binary files |old mode |new file mode |deleted file mode "
                           rb"|rename from |copy from |similarity index )", re.M)  # fmt: skip
MAX_BYTES = 1 << 30


class Incoming:
    """One patch to adopt. `author` is "Name <email>" or "" (then the tree's git identity is used); `date` is an
    RFC 2822 date or "" (then the source file's time)."""

    def __init__(self, source: str, name: str, diff: bytes, strip: int) -> None:
        self.source = source
        self.name = name
        self.diff = diff
        self.strip = strip
        self.subject = ""
        self.body = ""
        self.author = ""
        self.date = ""
        self.mtime = 0.0
        self.original = b""  # the whole message, kept byte for byte when it already is a normalised patch
        self.header: bytes | None = None  # everything above the diff, kept for export --quilt; None: a stackmgr patch
        self.quilt_name = ""  # its name in the quilt series it was listed in (`debian/x.diff`), kept for export
        self.trailer_tree: str | None = None
        self.trailer_base: str | None = None

    def paths_raw(self) -> list[bytes]:
        """Every file name the diff's `diff --git`, `---`, `+++` and `Index:` lines carry, as written (before -p
        stripping)."""
        return sorted(set(_scan(self.diff)[0]))

    def paths(self, strip: int) -> list[bytes]:
        """The tree paths the diff names under -p`strip`; a rename's or copy's own lines are never prefixed."""
        names, moved, _, _ = _scan(self.diff)
        return sorted({b"/".join(n.split(b"/")[strip:]) for n in names if n.count(b"/") >= strip} | set(moved))


class Refused:
    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason


class Empty(Refused):
    """A patch that changes nothing (`empty_patch`): skipped with a note, never a refusal of the stack."""


class QuiltDir:
    """A directory with a quilt `series` file: its patches in order, the series name it suggests, and the series'
    layout (docs/FORMATS.md#series-file): the comment and blank lines above each patch's line (`above`, by the
    id of the patch's first item), what follows the name on that line (`suffix`: `-p1`, a trailing comment, as
    written), and the lines after the last patch (`trailing`). An indented comment line is moved to column 0
    (stackmgr's series grammar refuses it, quilt reads it as a patch named `#`); an empty patch file, which
    quilt applies as nothing, becomes a comment line in its place (`empty`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[Incoming | Refused] = []
        self.above: dict[int, list[str]] = {}
        self.suffix: dict[int, str] = {}
        self.trailing: list[str] = []
        self.empty: list[Refused] = []  # empty patch files: nothing to import, the stack goes on
        here = os.path.abspath(path)
        while os.path.basename(here) in ("patches", "debian") and os.path.dirname(here) != here:
            here = os.path.dirname(here)  # PKG/debian/patches: the series is PKG's
        self.suggested_series = os.path.basename(here) or os.path.basename(os.path.abspath(path))


def read_inputs(paths: list[str], store_root: str | None = None) -> tuple[list[Incoming | Refused], QuiltDir | None]:
    """Every patch in the given files and directories, in order; the quilt directory if one was given. A path in
    the store (`store_root`) is a pulled file: one reached through a symbolic link there is not read."""
    items: list[Incoming | Refused] = []
    quilt = None
    for path in paths:
        if store_root is not None and _in_store_through_link(store_root, path):
            items.append(Refused(path, "reached through a symbolic link in the store (not followed); give the file "
                                       "itself"))  # fmt: skip
            continue
        if os.path.isdir(path):
            found = read_quilt_dir(path)
            items.extend(found.items)
            if os.path.isfile(os.path.join(path, "series")):
                quilt = found
        else:
            items.extend(read_file(path))
    return items, quilt


_SERIES_COMMENT = re.compile(r"(?:^|[ \t]+)#")  # quilt: a `#` after a blank (or in column 0) starts a comment


def read_quilt_dir(path: str) -> QuiltDir:
    found = QuiltDir(path)
    series = os.path.join(path, "series")
    if os.path.islink(series):  # nothing in a quilt directory is read through a link (it may be someone's)
        found.items.append(Refused(series, "a symbolic link (not followed); give the series file itself"))
        return found
    if not os.path.isfile(series):
        found.items.append(Refused(path, "a directory without a quilt `series` file"))
        return found
    with open(series, "rb") as f:
        lines = [ln.removesuffix("\r") for ln in f.read().decode("utf-8", "surrogateescape").split("\n")]
    if lines and not lines[-1]:
        lines.pop()
    pending: list[str] = []
    listed: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        cut = _SERIES_COMMENT.search(line)
        text = (line[: cut.start()] if cut else line).strip()
        if not text:
            pending.append(line.lstrip() if cut else "")
            continue
        words = text.split()
        where = f"{series}:{lineno}"
        if words[0] in listed:  # quilt refuses the series at its second push of one patch: so does the import
            found.items.append(Refused(where, f"{words[0]} is listed twice (first on line {listed[words[0]]}), as "
                                       "`quilt push` refuses it"))  # fmt: skip
            continue
        listed[words[0]] = lineno
        strip = 1
        for opt in words[1:]:
            if re.fullmatch(r"-p\d", opt):
                strip = int(opt[2:])
            elif opt not in ("-R",):
                found.items.append(Refused(where, f"unknown option {opt}"))
                break
        else:
            if "-R" in words[1:]:
                found.items.append(Refused(where, "reversed patches (-R) are not imported"))
                continue
            target = os.path.join(path, words[0])
            if ".." in words[0].split("/") or words[0].startswith("/"):
                found.items.append(Refused(where, f"{words[0]} points outside the quilt directory"))
            elif _linked(path, words[0]):
                found.items.append(Refused(where, f"{words[0]} is a symbolic link (not followed)"))
            elif not os.path.isfile(target):
                found.items.append(Refused(where, f"{words[0]} is listed but missing"))
            else:
                read = read_file(target, strip=strip, quilt=True)
                if len(read) == 1 and isinstance(read[0], Empty):  # quilt applies it as nothing: a comment keeps
                    found.empty.append(read[0])  # its place
                    pending.append(f"# {line.strip()}  (empty in the quilt series)")
                    continue
                if len(read) == 1 and isinstance(read[0], Incoming):
                    read[0].quilt_name = words[0]
                found.items.extend(read)
                found.above[id(read[0])], pending = pending, []
                rest = line.lstrip()[len(words[0]) :]
                found.suffix[id(read[0])] = rest if words[1:] in ([], ["-p1"]) else (
                    " " + line[cut.start() :].lstrip() if cut else "")  # fmt: skip
    found.trailing = pending
    return found


def _linked(directory: str, rel: str) -> bool:
    """Whether a component of `rel` below `directory` is a symbolic link (or `rel` is no plain relative path)."""
    try:
        return is_link_inside(directory, rel) is not None
    except OutsideStore:
        return True


def _in_store_through_link(store_root: str, path: str) -> bool:
    root = os.path.abspath(store_root)
    rel = os.path.relpath(os.path.abspath(path), root)
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir:
        return False
    return _linked(root, rel.replace(os.sep, "/"))


def read_file(path: str, strip: int | None = None, quilt: bool = False) -> list[Incoming | Refused]:
    """The patches of one file (an mbox holds several); an `Empty` one for a file or message that changes nothing."""
    try:
        with open(path, "rb", buffering=0) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # /dev/zero, a FIFO: no end to read to
                return [Refused(path, "not a regular file")]
            data = f.read(MAX_BYTES)
            if len(data) >= MAX_BYTES:
                return [Refused(path, "larger than 1 GiB (git apply takes less)")]
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        return [Refused(path, f"cannot be read ({exc.strerror})")]
    said = empty_patch(data, quilt)
    if said is not None:
        return [Empty(path, said)]
    # A quilt patch is one patch however many mail headers it holds (a backport squashing two upstream commits:
    # `From <sha>` twice, then one diff), as GNU patch reads it; a file given as mails is split at each.
    starts = [m.start() for m in _MBOX_FROM.finditer(data)] if data.startswith(b"From ") and not quilt else []
    if len(starts) > 1:
        messages = [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True)]
        results = [Empty(f"{path} (message {n})", GIT_AM_EMPTY) if empty_patch(m, quilt) else
                   read_patch(f"{path} (message {n})", m, None, strip)
                   for n, m in enumerate(messages, start=1)]  # fmt: skip
    else:
        results = [read_patch(path, data, _stem(path), strip, quilt)]
    for r in results:
        if isinstance(r, Incoming):
            r.mtime = mtime
    return results


def read_patch(source: str, data: bytes, name: str | None, strip: int | None,
               quilt: bool = False) -> Incoming | Refused:  # fmt: skip
    """One patch: its description and diff, checked for what git apply would take wrongly or not at all. Whatever
    goes wrong reading one file is that file's refusal, never the end of the import."""
    try:
        return _read_patch(source, data, name, strip, quilt)
    except StackmgrError as exc:
        return Refused(source, exc.message)
    except (ValueError, LookupError, UnicodeError) as exc:
        return Refused(source, f"unreadable header ({exc})")


def _read_patch(source: str, data: bytes, name: str | None, strip: int | None, quilt: bool) -> Incoming | Refused:
    data = decoded(data)  # a base64 or quoted-printable mail body, as git am decodes it
    at = diff_start(data)
    if b"\0" in data[: at if at >= 0 else 8192][:8192] and b"GIT binary patch" not in data:  # a NUL in a text
        return Refused(source, "not a patch (a binary file)")  # hunk (a test file vim's CVE fix adds) is git's to read
    if at < 0:
        return Refused(source, "not a patch (no diff found)")
    head, diff = data[:at], data[at:]
    problem = _check_diff(diff) or (None if quilt else _check_stat(head, diff))  # a series entry's stat: trimmed
    if problem:
        return Refused(source, problem)
    git_style = diff.startswith(b"diff --git ") or b"\ndiff --git " in diff
    item = Incoming(source, name or "", diff, -1)  # -1: guessed against the tree
    item.original = data
    if git_style:
        section = diff[diff.find(b"diff --git ") + 11 :].split(b"\ndiff --git ", 1)[0]
        item.strip = header_strip(section.split(b"\n", 1)[0], _moved(section))  # 0: `diff.noprefix`
        if strip is not None and strip != item.strip:
            return Refused(source, f"listed with -p{strip}, but its git diff headers need -p{item.strip}")
    elif strip is not None:
        item.strip = strip
    problem = describe(item, head)
    if problem:
        return Refused(source, problem)
    kept = patchfile.original_header(data)  # an export of an imported patch: the header it came with
    item.header = kept if kept is not None else None if item.trailer_tree or item.trailer_base else head
    item.quilt_name = patchfile.original_name(data)
    if not item.name:
        item.name = _slug(item.subject) or "imported"
    return item


def _moved(section: bytes) -> tuple[bytes, bytes] | None:
    """The (from, to) names of a git diff section's rename or copy, unprefixed as git writes them."""
    head = section.split(b"\n@@ ", 1)[0]
    old = re.search(rb"^(?:rename|copy) from (.*)$", head, re.M)
    new = re.search(rb"^(?:rename|copy) to (.*)$", head, re.M)
    return (file_name(old.group(1), False), file_name(new.group(1), False)) if old and new else None


def _check_diff(diff: bytes) -> str | None:
    """Hunks cut short (a truncated file), absolute paths, `..` and `.git` components; git apply refuses some
    of these itself, but `--- /etc/x` stripped by -p1 would quietly become `etc/x`."""
    names, moved, hunks, problem = _scan(diff)
    for raw in names + moved:
        if raw.startswith(b"/"):
            return f"absolute path {_show(raw)}"
        parts = raw.split(b"/")
        if b".." in parts:
            return f"path with '..': {_show(raw)}"
        if any(p.lower() == b".git" for p in parts):
            return f"path inside .git: {_show(raw)}"
    if problem:
        return problem
    for section in re.split(rb"\n(?=diff --git )", diff):
        if section.startswith(b"diff --git ") and not _SECTION_BODY.search(section):
            end = section.find(b"\n")
            name = git_header_names(section[11 : end if end >= 0 else len(section)])[-1]
            return f"truncated (the diff of {_show(name)} stops after its header)"
    if (
        not hunks
        and b"GIT binary patch" not in diff
        and not re.search(
            rb"^(?:new file mode|deleted file mode|old mode|rename from|copy from|Binary files)", diff, re.M
        )
    ):
        return "not a patch (no hunks)"
    return None


def _signed(diff: bytes) -> bool:
    """The mail ends with git format-patch's signature (`-- ` and a version line): the file was not cut short, so
    a file missing from the diff was taken out by hand (Debian's sed CVE patch lists NEWS it no longer holds)."""
    at = diff.rfind(b"\n-- \n")
    return at >= 0 and len(diff[at + 5 :].strip().splitlines()) <= 2 and len(diff) - at < 200


def _check_stat(head: bytes, diff: bytes) -> str | None:
    """A mail's diffstat says how many files follow; fewer is a truncated file. A diffstat that does not agree
    with itself (a hand-trimmed patch whose stat lines and total differ, as in glibc's Debian series) says
    nothing: quilt and git am never read it. Not asked of a quilt series' patch: security backports drop files
    of the upstream mail and keep its diffstat (jq, sqlite3, cyrus-sasl2 in Debian), and quilt applies them."""
    sep = head.rfind(b"\n---\n")
    m = _STAT_FILES.search(head, sep) if sep >= 0 else None
    if m is None:
        return None
    listed, present = int(m.group(1)), len(re.findall(rb"^diff --git ", diff, re.M))
    lines = len(re.findall(rb"^ .*\S.* \| +(?:\d+|Bin)", head[sep : m.start() + 1], re.M))
    if present and present < listed and lines == listed and not _signed(diff):
        return f"truncated (its diffstat lists {listed} files, the diff has {present})"
    return None


def _scan(diff: bytes) -> tuple[list[bytes], list[bytes], int, str | None]:
    """One walk over the diff, hunk-aware: the raw (unstripped, unquoted) file names its headers carry outside
    hunks, the names of its `rename`/`copy` lines, the number of hunks, and what is wrong when a hunk is cut
    short."""
    names: list[bytes] = []
    moved: list[bytes] = []
    old = new = hunks = 0
    traditional = True  # the `---`/`+++` names of a git diff end at a tab; a traditional diff's may hold one
    for line in diff.split(b"\n")[:-1] if diff.endswith(b"\n") else diff.split(b"\n"):
        if old > 0 or new > 0:
            tag = line[:1]
            if tag in (b" ", b"", b"\r"):
                old, new = old - 1, new - 1
            elif tag == b"-":
                old -= 1
            elif tag == b"+":
                new -= 1
            elif tag != b"\\":
                return names, moved, hunks, "truncated or corrupt (a hunk ends early)"
            continue
        m = _HUNK.match(line)
        if m:
            hunks += 1
            old = int(m.group(1)) if m.group(1) is not None else 1
            new = int(m.group(2)) if m.group(2) is not None else 1
        elif line.startswith(b"diff --git "):
            names.extend(git_header_names(line[11:]))
            traditional = False
        elif line.startswith((b"--- ", b"+++ ")):
            names.append(file_name(line[4:], traditional))
        elif line.startswith((b"rename from ", b"rename to ", b"copy from ", b"copy to ")):
            moved.append(file_name(line.split(b" ", 2)[2], False))
        elif line.startswith((b"Index: ", b"diff -")):
            traditional = True
            if line.startswith(b"Index: "):
                names.append(file_name(line[7:], False))
    names = [n for n in names if n and n != b"/dev/null"]
    return names, moved, hunks, ("truncated (its last hunk ends early)" if old > 0 or new > 0 else None)


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for suffix in (".patch", ".diff"):
        if base.endswith(suffix):
            return _slug(base[: -len(suffix)], keep_case=True, limit=190)
    return _slug(base, keep_case=True, limit=190)


def _slug(text: str, keep_case: bool = False, limit: int = 52) -> str:
    """A patch name from a subject (cut to 52 characters, as git format-patch cuts them) or a file name (kept
    whole, so a quilt series keeps its names), kept to docs/FORMATS.md#names."""
    s = re.sub(r"[^A-Za-z0-9._+-]+", "-", text if keep_case else text.lower())
    if keep_case:  # a file name: changed only where the rule forbids (`fix-.patch` stays `fix-`; a trailing dot
        # goes, as `NAME..patch` is no series entry: format-patch cuts a long subject just after a dot)
        s = re.sub(r"\.{2,}", ".", s.lstrip("._+-"))[:limit].rstrip(".")
    else:
        s = re.sub(r"\.{2,}", ".", s.strip("-."))[:limit].rstrip("-.")
    while s.endswith(".lock"):
        s = s[:-5].rstrip("-.")
    return s


def _show(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
