"""Terminal escapes from a pulled store (docs/SECURITY.md, promise 6): a teammate's Subject, record or series
file can carry ESC sequences (window title, screen clear), C1 controls that some terminals read as CSI, and bidi
overrides that reorder what a reviewer reads (Trojan Source). Whatever the victim runs, such characters reach
stdout and stderr only escaped (`\\x1b`, `\\u202e`), every text line stays one line, and `--json` gives the exact
strings back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from stackmgr import output
from tests.conftest import Result
from tests.security.conftest import Team

TITLE = "\x1b]0;pwned\x07"  # OSC: sets the window title
CLEAR = "\x1b[2J"  # CSI: clears the screen
C1_CSI = "\x9b"  # a C1 control: CSI for terminals that read 8-bit controls
RLO = "\u202e"  # right-to-left override: `txt.exe` reads as `exe.txt`
HOSTILE = f"title{TITLE} clear{CLEAR} csi{C1_CSI}31m rlo{RLO}exe.txt" + "\u2066pdi\u2069 nul\x00 del\x7f cr\r x"
FORGED_LINE = "fine\n2026-01-01  lnk-000000000000  fix  vllm  promoted fresh"  # a second line, forged

# What may never reach a terminal raw: C0 controls but the newline and tab the layout prints, DEL, C1 controls,
# line/paragraph separators, bidi embeddings, overrides, isolates and marks.
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def assert_inert(result: Result, *, command: str = "") -> None:
    for name, text in (("stdout", result.out), ("stderr", result.err)):
        found = _RAW.findall(text)
        assert not found, f"{command}: raw {sorted({hex(ord(c)) for c in found})} on {name}: {text!r}"
    assert "Traceback" not in result.err and "internal error" not in result.err, f"{command}: {result.err}"


def toml(text: str) -> str:
    """A TOML basic string: JSON's escapes (\\uXXXX for every control character) are TOML's too."""
    return json.dumps(text)


def hostile_patch(team: Team, subject: str, body: str, tree: str = "vllm") -> bytes:
    """The victim's own patch `fix` with a teammate's Subject, body and Stackmgr-Tree trailer."""
    data = (team.victim.store / "patches" / "fix.patch").read_bytes()
    head, sep, rest = data.partition(b"\nStackmgr-Tree: vllm\n")
    assert sep, data
    head = re.sub(rb"(?m)^Subject: .*$", b"Subject: " + subject.encode(), head.split(b"\n\n")[0])
    return head + b"\n\n" + body.encode() + b"\n\nStackmgr-Tree: " + tree.encode() + b"\n" + rest


def record(team: Team, *, tree: str = "vllm", metric: str = "output_throughput", unit: str = "tok/s",
           gate: str = "json", detail: str = "", lesson: str = "", author: str = "mallory", extra: str = "",
           artifacts: tuple[tuple[str, bytes | None], ...] = ()) -> dict[str, bytes | str]:  # fmt: skip
    """A link record for patch `fix` as a teammate can push it, with the artifacts it names (None: named only)."""
    sha = hashlib.sha256((team.victim.store / "patches" / "fix.patch").read_bytes()).hexdigest()
    files: dict[str, bytes | str] = {}
    lines = ['schema = "stackmgr.link/v1"', 'id = "lnk-0123456789ab"', 'created = "2026-06-20T10:00:00.000001Z"',
             f"author = {toml(author)}", "", "[patch]", 'name = "fix"', f"tree = {toml(tree)}", f'sha256 = "{sha}"',
             'patch_id = ""', extra]  # fmt: skip
    for path, data in artifacts:
        digest = hashlib.sha256(data or b"").hexdigest()
        lines += ["[[artifact]]", f"path = {toml(path)}", f'sha256 = "{digest}"', f"size = {len(data or b'')}"]
        if data is not None:
            files[path] = data
    lines += ["[[metric]]", f"name = {toml(metric)}", "value = 107.77", f"unit = {toml(unit)}",
              'direction = "higher"', "[[gate]]", f"name = {toml(gate)}", 'status = "fail"',
              f"detail = {toml(detail)}", "[verdict]", 'status = "rejected"', f"lesson = {toml(lesson)}",
              "do_not_revive = true"]  # fmt: skip
    files["links/fix/20260620T100000.000001Z-lnk-0123456789ab.toml"] = "\n".join(lines) + "\n"
    return files


def test_a_subject_and_body_from_a_pull_are_shown_escaped_by_every_command(team: Team) -> None:
    patch = hostile_patch(team, f"[PATCH] fix {HOSTILE}", f"why:\n{HOSTILE}\nend")
    team.attack({"patches/fix.patch": patch.replace(b"\nend\n", b"\nend \x9b\xff\x1b\n")})  # and raw bytes
    for args in (["show", "fix"], ["series", "replay"], ["series"], ["status"], ["check", "-v"], ["lint"],
                 ["links"], ["apply", "replay", "--dry-run"], ["apply", "replay"], ["log"], ["verify"]):  # fmt: skip
        result = team.sm(*args)
        assert_inert(result, command=" ".join(args))
    shown = team.sm("show", "fix")
    assert "fix title\\x1b]0;pwned\\x07 clear\\x1b[2J csi\\u009b31m rlo\\u202eexe.txt" in shown.out
    assert "  why:\n" in shown.out and "  end " in shown.out, "the body keeps its lines, each escaped"
    doc = json.loads(team.sm("--json", "show", "fix").out)
    assert doc["patch"]["subject"] == f"fix {HOSTILE}", "--json stays exact"
    assert doc["patch"]["description"].startswith(f"why:\n{HOSTILE}\nend ")
    team.canary.assert_untouched(shown.out, shown.err)


def test_an_encoded_subject_cannot_smuggle_escapes_past_the_decoder(team: Team) -> None:
    """RFC 2047 hides the ESC from a byte filter: `=?utf-8?b?…?=` decodes to it only when the header is read."""
    word = "=?utf-8?b?" + base64.b64encode(f"done{TITLE}{CLEAR}{RLO}".encode()).decode() + "?="
    team.attack({"patches/fix.patch": hostile_patch(team, f"[PATCH] {word}", "body")})
    for args in (["show", "fix"], ["series", "replay"], ["lint"]):
        assert_inert(team.sm(*args), command=" ".join(args))
    doc = json.loads(team.sm("--json", "show", "fix").out)
    assert doc["patch"]["subject"] == f"done{TITLE}{CLEAR}{RLO}"


def test_a_record_with_escapes_in_every_field_is_shown_escaped(team: Team) -> None:
    bench = json.dumps({"model_id": f"Qwen{TITLE}\ud800", "request_rate": 1, "max_concurrency": 8,
                        "num_prompts": 50, "output_throughput": 107.77}).encode()  # fmt: skip
    run = (f"[run]\nname = {toml('nightly' + CLEAR)}\ncommand = [{toml('vllm' + TITLE)}]\nexit_code = 0\n"
           f"host = {toml('gpu' + RLO + '01')}\nstart = \"2026-06-20T10:00:00\"\nduration_s = 1.0\n")  # fmt: skip
    team.attack(record(team, tree=f"vllm{TITLE}", metric=f"tput{CLEAR}", unit=f"tok/s{C1_CSI}",
                       gate=f"json{RLO}\nforged", detail=HOSTILE, lesson=f"do not {TITLE}revive\n{FORGED_LINE}",
                       author=HOSTILE, extra=run,
                       artifacts=(("results/bench.json", bench), (f"results/gone{TITLE}.log", None))))  # fmt: skip
    for args in (["show", "fix"], ["links"], ["links", "--sort", "metric", "--metric", f"tput{CLEAR}"],
                 ["links", "--all"], ["compare", "fix"], ["compare", "lnk-0123456789ab"], ["verify"], ["lint"],
                 ["series", "replay"], ["status"], ["apply", "replay", "--dry-run"], ["apply", "replay"],
                 ["apply", "replay", "--override", "worth another try"], ["log"]):  # fmt: skip
        assert_inert(team.sm(*args), command=" ".join(args))
    shown = team.sm("show", "fix").out
    assert "json\\u202e\\nforged" in shown and "tok/s\\u009b" in shown
    assert not any(line.startswith("2026-01-01  lnk-000000000000") for line in shown.splitlines()), shown
    listed = team.sm("links").out
    assert len(listed.splitlines()) == 2, "a header and one record, one line: a newline in a field cannot forge a row"
    as_json = team.sm("--json", "show", "fix").out
    assert as_json.isascii() and not _RAW.search(as_json), "JSON escapes every control and non-ASCII character"
    link = json.loads(as_json)["links"][0]
    assert link["verdict"]["lesson"] == f"do not {TITLE}revive\n{FORGED_LINE}"
    assert link["gates"][0]["name"] == f"json{RLO}\nforged" and link["gates"][0]["detail"] == HOSTILE, "--json is exact"
    groups = json.loads(team.sm("--json", "compare", "fix").out)["groups"]
    assert groups[0]["config"]["model_id"] == f"Qwen{TITLE}\ud800", "a lone surrogate too, exactly"


def test_a_series_file_with_escapes_in_a_comment_a_guard_and_a_patch_line(team: Team) -> None:
    series = (team.victim.store / "series" / "replay").read_text()
    team.attack({"series/replay": f"# {HOSTILE}\n{series.rstrip()} #+gu{CLEAR}ard\n",
                 "series/evil": f"fix.patch\nx{TITLE}.patch\n"})  # fmt: skip
    for args in (["series"], ["series", "replay"], ["series", "evil"], ["apply", "replay"], ["apply", "evil"],
                 ["lint"], ["status"], ["show", "fix"], ["links", "--series", "replay"]):  # fmt: skip
        assert_inert(team.sm(*args), command=" ".join(args))
    refused = team.sm("apply", "replay")
    assert refused.code == 3 and "gu\\x1b[2Jard" in refused.err, refused.err
    assert len(refused.err.splitlines()) == 1, refused.err


def test_a_file_name_a_teammate_chose_is_escaped_in_import_log_and_undo(team: Team) -> None:
    """The journal lives on this machine, but what it records can come from the store: `import incoming/*`
    records the names of the files it imported, and a teammate chose those."""
    name = f"0001-fix{TITLE}{RLO}.patch"
    planted = (f"stackmgr-op 1\ncommand\tsave {TITLE}{CLEAR}\nstarted\t1781344931\nstate\tdone\nundoes\t-\n"
               "file\t0\t-\tpatches/x.patch\n")  # fmt: skip  # a journal force-added to the store: ignored or escaped
    team.attack({f"incoming/{name}": "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hello there\n",
                 ".stackmgr/ops/1781344931000-0123456789ab/op": planted})  # fmt: skip
    imported = team.sm("import", str(team.victim.store / "incoming" / name))
    assert imported.code == 0, imported.err
    assert_inert(imported, command="import")
    for args in (["log"], ["log", "-n", "1"], ["--json", "log"], ["check", "-v"], ["recover"], ["undo"], ["log"]):
        assert_inert(team.sm(*args), command=" ".join(args))
    operations = json.loads(team.sm("--json", "log").out)["operations"]
    assert any(name in op["command"] for op in operations), "--json keeps the command exactly"
    team.canary.assert_untouched()


def test_error_lines_name_store_strings_escaped_and_on_one_line(team: Team) -> None:
    """A do-not-revive lesson in a refusal, a damaged record, a broken patch header, a bad series line, a
    Stackmgr-Tree that is no tree name: each error names what it found escaped, and every stderr line is one of
    stackmgr's (a newline in a store string cannot forge a line)."""
    team.attack(record(team, lesson=f"never{TITLE}\n{FORGED_LINE}"))
    refused = team.sm("series", "add", "other", "fix")
    assert refused.code != 0 and "never\\x1b]0;pwned\\x07\\nfine\\n2026-01-01" in refused.err, refused.err
    results = [refused, team.sm("apply", "replay"), team.sm("show", "fix")]
    team.attack({"series/evil": f"fix.patch\nbad{TITLE}name\n", "links/other/bad.toml": f"schema = {toml(HOSTILE)}\n",
                 "patches/broken.patch": f"From x\nSubject: {HOSTILE}\n\nno trailers\n---\n".encode(),
                 "patches/alien.patch": hostile_patch(team, "[PATCH] fix", "body", tree=f"vllm{TITLE}{CLEAR}"),
                 "series/alien": "alien.patch\n"})  # fmt: skip
    for args in (["apply", "evil"], ["series", "evil"], ["show", "fix"], ["links"], ["lint"], ["show", "broken"],
                 ["show", "alien"], ["apply", "alien"], ["series", "alien"], ["check", "-v"], ["show", f"x{TITLE}"],
                 ["series", "add", "replay", f"x{CLEAR}"], ["compare", f"lnk{RLO}"]):  # fmt: skip
        results.append(team.sm(*args))
    for result in results:
        assert_inert(result)
        lines = result.err.splitlines()
        assert all(line.startswith("stackmgr: ") for line in lines), f"a line forged: {result.err}"
    alien = team.sm("show", "alien")
    assert "vllm\\x1b]0;pwned\\x07\\x1b[2J" in alien.out + alien.err


def test_colour_survives_and_a_forged_colour_code_does_not(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a colour terminal stackmgr's own colours reach it; the same codes inside a Subject are escaped."""
    monkeypatch.setattr(output, "color_on", lambda stream: True)
    team.attack({"patches/fix.patch": hostile_patch(team, "[PATCH] looks \x1b[32mfine\x1b[0m", "body")})
    shown = team.sm("show", "fix").out
    assert shown.startswith("\x1b[1mfix\x1b[0m"), "our bold name"
    assert "\x1b[33mUNLINKED\x1b[0m" in shown, shown
    assert "looks \\x1b[32mfine\\x1b[0m" in shown
    assert shown.count("\x1b") == shown.count("\x1b[1m") + shown.count("\x1b[33m") + shown.count("\x1b[0m")


def test_the_escaping_function_itself() -> None:
    assert output.show_text(f"a{TITLE}b\n\tc{RLO}\u2066\u2069{C1_CSI}\udc9b\ud800") == (
        "a\\x1b]0;pwned\\x07b\\n\\tc\\u202e\\u2066\\u2069\\u009b\\x9b\\ud800")  # fmt: skip
    assert output.for_terminal(f"row\t{CLEAR}\n") == "row\t\\x1b[2J\n", "layout kept, the rest escaped"
    assert output.show_text("plain é ✓ ↑ 中文") == "plain é ✓ ↑ 中文"


def test_a_patch_shown_on_a_terminal_is_escaped_but_piped_exactly() -> None:
    import io
    import sys

    class Tty(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    data = b"+line \x1b]0;pwned\x07 \x9b\n"
    for tty in (False, True):
        raw = io.BytesIO()
        stream = Tty(raw, encoding="utf-8") if tty else io.TextIOWrapper(raw, encoding="utf-8")
        previous, sys.stdout = sys.stdout, stream
        try:
            output.out_bytes(data)
        finally:
            sys.stdout = previous
        stream.flush()
        assert raw.getvalue() == (b"+line \\x1b]0;pwned\\x07 \\x9b\n" if tty else data)


def test_the_progress_line_shows_its_message_as_text_never_as_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's spinner and bar (on a terminal, after a second) keep their own cursor codes, while the message is
    plain text: no rich markup, no `{task…}` format fields, no escape sequence of its own."""
    import io
    import sys
    import time

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Tty()
    monkeypatch.setattr(sys, "stderr", output.TerminalStream(screen))
    monkeypatch.setattr(output.activity, "DELAY", 0.01)
    with output.activity(f"rebuilding [bold red]x[/] {{task.fields}} {TITLE}{RLO}"):
        time.sleep(0.2)
        output.progress_total(2)
        output.tick()
        time.sleep(0.2)
    shown = screen.getvalue()
    assert "rebuilding [bold red]x[/] {task.fields} \\x1b]0;pwned\\x07\\u202e" in shown
    assert TITLE not in shown and RLO not in shown
    assert "\x1b[?25l" in shown, "rich's own cursor codes reach the terminal"


def test_an_undecodable_byte_in_a_file_name_never_reaches_the_terminal_as_a_c1_control(team: Team) -> None:
    """Under the C locale Python writes an undecodable byte back as that byte (surrogateescape): 0x9B, a file
    name's byte the journal keeps, would be CSI to an 8-bit terminal; under UTF-8 it made `log` crash. It is
    shown as \\x9b."""
    import os
    import subprocess
    import sys

    name = "0002-csi\udc9b\x1b[2J.patch"  # the bytes 9B and 1B: not UTF-8, and ESC
    team.attack({f"incoming/{name}": "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hello again\n"})
    imported = team.sm("import", os.path.join(str(team.victim.store), "incoming", name))
    assert imported.code == 0, imported.err
    for locale, command in (("C", "log"), ("C.UTF-8", "log"), ("C", "undo"), ("C.UTF-8", "redo")):
        env = {**os.environ, "LC_ALL": locale, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        env.pop("PYTHONIOENCODING", None)
        done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(team.victim.store), command],
                              capture_output=True, env=env)  # fmt: skip
        said = done.stdout + done.stderr
        assert done.returncode == 0 and b"internal error" not in said, (locale, command, said)
        assert b"\x9b" not in said and b"\x1b" not in said, (locale, command, said)
        assert b"0002-csi\\x9b\\x1b[2J.patch" in said, (locale, command, said)
