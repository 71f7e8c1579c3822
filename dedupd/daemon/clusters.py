"""The clusters a run's alerting documents join, before any union is written (pure once the roots are read).

For each document that verified matches: the cluster root each match had before the run (read in one
lookup), the best match of each distinct earlier cluster (what its union needs: one per root), and the root
the unions will leave it and the roots they merge. The evictions (daemon/evictions.py) group a bucket's
members by these clusters; the unions (daemon/outputs.py) send them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dedupd.daemon.batch import Run
from dedupd.daemon.planner import Action, Step
from dedupd.index.matching import Verification
from dedupd.index.protocol import Gateway
from dedupd.similarity.bounds import earlier_clusters, merged_roots


@dataclass(frozen=True, slots=True)
class Clusters:
    """A run's alerting documents and the clusters they join.

    ``names`` maps the integer ids of the alerting documents and their matches to document ids; ``read`` holds
    the ids they read; ``roots`` the cluster roots before the run's unions (an absent id is its own root);
    per alerting document, ``groups`` its matches, ``earlier`` the root each had and its best match of each
    distinct root, and ``merged`` its root after its union and the roots it merges; ``final`` the root after
    the run's unions of each of those."""

    alerting: list[tuple[int, Step]]
    names: dict[int, str]
    read: set[int]
    roots: dict[int, int]
    groups: list[tuple[int, list[int]]]
    earlier: list[tuple[list[int], list[int]]]
    merged: list[tuple[int, int, list[int]]]

    @property
    def final(self) -> dict[int, int]:
        return merged_roots(self.merged)


def clusters_of(gw: Gateway, run: Run, done: list[int], verified: Verification) -> Clusters:
    """The clusters the run's ``done`` steps that alert join (one roots lookup for the ids they read)."""
    steps, matches = run.steps, verified.matches
    alerting = [(i, steps[i]) for i in done if i in matches and steps[i].action is not Action.QUERY]
    if not alerting:
        return Clusters([], {}, set(), verified.roots, [], [], [])
    names = {m.num: m.doc_id for i, _ in alerting for m in matches[i]}
    names.update((step.num, step.entry.doc_id) for _, step in alerting)
    read: set[int] = set().union(*(verified.read.get(i, ()) for i, _ in alerting))
    wanted = sorted(read - verified.roots.keys())
    roots = dict(verified.roots)
    if wanted:
        roots.update(zip(wanted, gw.roots(wanted), strict=True))
    groups = [(step.num, [m.num for m in matches[i]]) for i, step in alerting]
    earlier = earlier_clusters(groups, roots)  # one union per distinct root, not per match
    # the clusters as the unions will leave them (one more consumer's merges aside): EVICT only groups by them
    joined = [
        (num, list(dict.fromkeys(before))) for (num, _), (before, _) in zip(groups, earlier, strict=True)
    ]
    merged = [(num, min(roots.get(num, num), *rs), rs) for num, rs in joined]
    return Clusters(alerting, names, read, roots, groups, earlier, merged)
