"""The names a user gives a result by (`reading.find_ref`: a link id, `lnk-` optional, or a run's name; `run_group`:
the runs of one run group), for did-you-mean when none answers and for shell completion (store/suggest.py makes the
suggestion)."""

from __future__ import annotations

from collections.abc import Iterable

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store.config import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.evidence.records import Link


def ref_names(store: Store) -> list[str]:
    """Every link id and run name of the store, sorted; [] when the records cannot be read. No git."""
    from stackmgr.evidence.reading import load_briefs

    try:
        briefs = load_briefs(store, [])
    except (OSError, StackmgrError):
        return []
    return sorted({b.id for b in briefs} | {b.run_name for b in briefs if b.run_name})


def unknown_ref(store: Store, ref: str, message: str, otherwise: str, also: Iterable[str] = ()) -> UsageProblem:
    """The refusal of `ref` that `find_ref` found nothing for (exit 2): `message`, then the closest link ids (to
    an id, `lnk-` given or not) and run names (never one two runs share: find_ref refuses those), else
    `otherwise`. `also`: other names the command takes there (compare: patches)."""
    from stackmgr.evidence.reading import ambiguous_run_names
    from stackmgr.store.suggest import did_you_mean

    names = ref_names(store)
    try:
        shared = set(ambiguous_run_names(store))
    except (OSError, StackmgrError):
        shared = set()
    if ref.startswith("lnk-"):
        candidates = [n for n in names if n.startswith("lnk-")]
    else:  # a run name, or an id without its `lnk-`
        candidates = [n.removeprefix("lnk-") for n in names if n not in shared] + list(also)
    return UsageProblem(message, did_you_mean(ref, candidates, otherwise))


def run_group(store: Store, name: str) -> list[Link]:
    """The current records of run group `name` (`run --repeat`'s `[run] group`: NAME of `--name NAME`, or
    `repeat-<stamp>-<hex>`; `ab`'s `PREFIX-A`, `PREFIX-B`), in the order they ran; [] for no such group."""
    from stackmgr.evidence.reading import load_links
    from stackmgr.evidence.states import effective

    found = [k for k in effective(load_links(store)) if k.run.get("group") == name]
    return sorted(found, key=lambda k: (k.run.get("repeat") if isinstance(k.run.get("repeat"), int) else 0, k.id))
