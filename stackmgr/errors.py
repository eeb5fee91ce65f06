"""Domain errors. Each carries the one line the user sees and its exit code (docs/FORMATS.md#exit-codes)."""

from __future__ import annotations


class StackmgrError(Exception):
    """An operation failed with nothing changed (exit 3). `hint` says what to do next."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class UsageProblem(StackmgrError):
    """The command line asks for something that cannot be (exit 2)."""

    exit_code = 2


class NotPreserved(StackmgrError):
    """A check said no: some change is not preserved in any patch (exit 1)."""

    exit_code = 1


class GitFailed(StackmgrError):
    """A git command failed; the message carries git's own last line."""

    def __init__(self, argv: list[str], returncode: int, stderr: bytes) -> None:
        lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        firm = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
        detail = (firm or lines or [f"exit {returncode}"])[0]
        shown = " ".join(a for a in argv if not a.startswith("-c") and "=" not in a)[:80]
        super().__init__(f"git failed ({shown}): {detail}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
