#!/usr/bin/env python3
"""A stream of syndicated stories: feeds that copy each other with known probabilities, and independent ones.

Each feed publishes stories of its own (random pseudo-word texts, so that two stories share no
shingle). The copying feeds then republish, story by story, what the feed they follow published,
each with probability ``p`` and with a few words edited (a near-duplicate, Jaccard about 0.85 on word
3-shingles, well above dedupd's default threshold of 0.8). Copies of copies happen too: D follows B,
so D republishes B's copies of A's stories. Feeds F and G copy nobody and nobody copies them.

Pushed through ``dedupd serve`` with ``DEDUPD_BASKETS=sources`` and mined (``dedupd mine``), the
duplicate clusters' sources should give the planted edges as rules: ``conf({A} -> {B})`` is the share
of A's stories that B republished, about 0.6, and no rule joins F or G to any feed.

Planted (``PLAN``: follower <- followed, probability): B <- A 0.6, C <- A 0.3, D <- B 0.5, E <- C 0.4.

    python scripts/gen_syndicated.py --out data/syndicated.jsonl [--seed 16] [--scale 1.0]

One JSON object per line (``id``, ``source``, ``text``), in publication order: a copy always comes
after what it copies.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

# follower -> (followed, probability that a story of the followed feed is republished by the follower)
PLAN: dict[str, tuple[str, float]] = {"B": ("A", 0.6), "C": ("A", 0.3), "D": ("B", 0.5), "E": ("C", 0.4)}
# stories each feed writes itself (F and G: independent)
OWN: dict[str, int] = {"A": 300, "B": 150, "C": 150, "D": 100, "E": 100, "F": 150, "G": 150}
INDEPENDENT = ("F", "G")
WORDS = 80  # words per story
EDITS = 2  # words replaced in each copy


@dataclass(frozen=True, slots=True)
class Story:
    """One published document: its id, its feed, its text and when it appeared."""

    id: str
    source: str
    text: str
    time: float


def _word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 9)))


def _edited(rng: random.Random, text: str) -> str:
    """``text`` with ``EDITS`` words replaced by new ones."""
    words = text.split()
    for i in rng.sample(range(len(words)), EDITS):
        words[i] = _word(rng)
    return " ".join(words)


def _followers_in_order() -> list[str]:
    """Followers after the feeds they follow (B before D, C before E)."""
    done: list[str] = []
    while len(done) < len(PLAN):
        for feed, (followed, _) in PLAN.items():
            if feed not in done and (followed not in PLAN or followed in done):
                done.append(feed)
    return done


def generate(seed: int = 16, scale: float = 1.0) -> list[Story]:
    """The stories of every feed in publication order (fixed ``seed``; ``scale`` multiplies ``OWN``)."""
    rng = random.Random(seed)
    by_feed: dict[str, list[Story]] = {feed: [] for feed in OWN}
    for feed, n in OWN.items():
        for i in range(round(n * scale)):
            text = " ".join(_word(rng) for _ in range(WORDS))
            by_feed[feed].append(Story(f"{feed}-{i}", feed, text, rng.uniform(0, 1000)))
    for feed in _followers_in_order():
        followed, p = PLAN[feed]
        for j, story in enumerate(list(by_feed[followed])):
            if rng.random() < p:
                copy = Story(
                    f"{feed}-copy-{j}", feed, _edited(rng, story.text), story.time + rng.uniform(1, 60)
                )
                by_feed[feed].append(copy)
    return sorted((s for stories in by_feed.values() for s in stories), key=lambda s: s.time)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/syndicated.jsonl"))
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every feed's own stories by this")
    args = ap.parse_args()
    stories = generate(args.seed, args.scale)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for s in stories:
            f.write(json.dumps({"id": s.id, "source": s.source, "text": s.text}) + "\n")
    plan = ", ".join(f"{follower} <- {followed} {p}" for follower, (followed, p) in PLAN.items())
    print(
        f"{len(stories)} stories from {len(OWN)} feeds ({plan}; independent: {', '.join(INDEPENDENT)}) -> {args.out}"
    )


if __name__ == "__main__":
    main()
