"""`stackmgr demo`: the whole workflow on a scratch store and tree in a temporary directory.

Nothing outside that directory is touched; each step prints the command a user would type and runs it as the
user's shell would: `python -m stackmgr ARGS` in a child process, so the demo is the real command line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from stackmgr import output
from stackmgr.git.repo import Repo, init_repo

_MODEL = "".join(f"def layer_{i}(x):\n    return x * {i}\n\n" for i in range(12))
_FILES = {
    "vllm/model_executor/routed_gemm.py": _MODEL,
    "vllm/v1/worker/gpu_model_runner.py": "def run(batch):\n    return batch\n",
    "benchmarks/old_probe.py": "print('probe')\n",
    "README.md": "# scratch vllm\n",
}


def _write(root: str, rel: str, data: bytes | str) -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def _step(title: str, *args: str) -> int:
    output.out("")
    output.out(output.paint(f"## {title}", "bold"))
    output.out(f"$ stackmgr {shlex.join(args)}")
    sys.stdout.flush()
    sys.stderr.flush()
    code = subprocess.run([sys.executable, "-m", "stackmgr", *args], check=False).returncode
    output.out(output.paint(f"(exit {code})", "dim"))
    return code


def _identity() -> None:
    """The scratch commits need an author even on a machine where git has none configured."""
    for who in ("AUTHOR", "COMMITTER"):
        os.environ.setdefault(f"GIT_{who}_NAME", "stackmgr demo")
        os.environ.setdefault(f"GIT_{who}_EMAIL", "demo@example.invalid")


def run_demo(keep: bool = False) -> None:
    _identity()
    root = tempfile.mkdtemp(prefix="stackmgr-demo-")
    here = os.getcwd()
    try:
        os.chdir(root)  # the scratch store is the one in sight too (a checkout holding a store says nothing)
        _walk(root)
    finally:
        os.chdir(here)
        if keep:
            output.out(f"\nscratch directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _walk(root: str) -> None:
    tree = os.path.join(root, "vllm")
    store = os.path.join(root, "store")
    os.environ["STACKMGR_STORE"] = store
    for rel, text in _FILES.items():
        _write(tree, rel, text)
    _write(tree, "assets/table.bin", bytes(range(256)))
    repo = init_repo(tree)
    base = repo.commit_all("upstream base")
    output.out(f"scratch tree {tree} at upstream commit {base}")

    _step("create a store", "init", store)
    _step("register the tree", "tree", "add", "vllm", tree)

    _write(tree, "vllm/model_executor/routed_gemm.py", _MODEL.replace("x * 3", "x.transpose(0, 1) * 3"))
    _write(
        tree,
        "vllm/v1/worker/gpu_model_runner.py",
        "def run(batch):\n    log(batch)  # probe\n    return batch\n",
    )
    _write(tree, "results/probe.log", "output_throughput=107.77 tok/s\njson gate: fail\n")
    _write(tree, "assets/table.bin", bytes(reversed(range(256))))
    os.unlink(os.path.join(tree, "benchmarks/old_probe.py"))
    output.out("\nedited two files, added a log, changed a binary, deleted a file")

    _step("what is in the dirty tree?", "status")
    _step("is everything preserved? (no: exit 1)", "check", "-v")
    _step("so a reset is refused, and nothing is touched (exit 1)", "reset")
    _step("save the diff as a patch in series replay-correctness", "save", "vllm-decode-replay-boundary", "-m",
          "decode replay boundary instrumentation\n\nRouted-GEMM layout fix plus a probe.",
          "--series", "replay-correctness")  # fmt: skip
    _step("now everything is preserved (exit 0)", "check", "-v")
    _write(tree, "results/probe.log", "output_throughput=107.77 tok/s\njson gate: fail!\n")
    _step("one more byte is noticed at once (exit 1)", "check", "-v")
    _write(tree, "results/probe.log", "output_throughput=107.77 tok/s\njson gate: fail\n")
    _step("undo that byte: preserved again (exit 0)", "check")
    before = _worktree_id(repo)
    _step("the reset is allowed now: back to the upstream commit", "reset")
    _step("the tree is clean", "status")
    _step("rebuild the saved state from the series", "apply", "replay-correctness")
    _step("the series is applied and the tree matches it", "status")
    _step("every command that changed something is in the log", "log", "-n", "3")
    _step("undo the apply: the clean tree is back", "undo")
    _step("redo it: the series is applied again", "redo")
    after = _worktree_id(repo)
    output.out("")
    output.out(output.paint("## the series rebuilt the tree exactly", "bold"))
    output.out(f"working tree id before the reset: {before}")
    output.out(f"working tree id after the apply:  {after}")
    output.out("identical" if after == before else output.paint("DIFFERENT", "red"))
    if after != before:
        raise SystemExit(1)


def _worktree_id(repo: Repo) -> str:
    from stackmgr.safety.snapshot import take_snapshot

    return take_snapshot("vllm", repo.top, 50 * 1024 * 1024).tree_id()
