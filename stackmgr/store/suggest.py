"""Did you mean: the names closest to one a user mistyped, said in a refusal's one line (docs/FORMATS.md#names).

The one place a suggestion is made. The lookups that refuse a name ask it (`names.patch_file` and `no_patch`,
`series.SeriesFile`, `config.Store.tree`, `evidence.reading.ref_hint`), each giving the names it would accept:
a suggestion is never a name the lookup itself would refuse. The store is untrusted: every name is shown escaped
(`output.show_text`). A leaf: imports nothing of the store, and `difflib` only when a name was not found.
"""

from __future__ import annotations

from collections.abc import Iterable

from stackmgr.errors import UsageProblem

CUTOFF = 0.6  # as close as git's own "did you mean" asks (difflib's ratio)
MOST = 3


def close_names(word: str, names: Iterable[str], n: int = MOST) -> list[str]:
    """Up to `n` of `names` closest to `word`, closest first: the same name in another case first, then those
    difflib finds at least CUTOFF alike (case ignored)."""
    import difflib

    known = sorted(set(names))
    folded: dict[str, list[str]] = {}
    for name in known:
        folded.setdefault(name.casefold(), []).append(name)
    same = [name for name in folded.get(word.casefold(), []) if name != word]
    close = difflib.get_close_matches(word.casefold(), list(folded), n=n, cutoff=CUTOFF)
    found = same + [name for key in close for name in folded[key] if name not in same and name != word]
    return found[:n]


def did_you_mean(word: str, names: Iterable[str], otherwise: str | None = None) -> str | None:
    """The hint of a refusal of `word`: `did you mean "a"?` (up to three, `"a", "b" or "c"`), each name escaped;
    `otherwise` when none is close."""
    from stackmgr.output import show_text

    found = [f'"{show_text(name)}"' for name in close_names(word, names)]
    if not found:
        return otherwise
    listed = found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"
    return f"did you mean {listed}?"


def unknown_tree(name: str, known: Iterable[str], otherwise: str) -> UsageProblem:
    """The refusal of a tree name the store does not know (exit 2): the known ones, the closest or `otherwise`."""
    names = sorted(known)
    return UsageProblem(
        f"unknown tree '{name}' (known: {', '.join(names) or 'none yet'})", did_you_mean(name, names, otherwise)
    )
