"""Prometheus text expositions of several processes as one: ``scix serve --workers N``'s ``/metrics``."""

from __future__ import annotations


def merged(texts: list[str]) -> str:
    """Several processes' Prometheus text expositions as one (``scix serve --workers N``: each worker keeps
    its own registry): the samples of one series summed — counters, histogram buckets, counts and sums add
    up across processes — except ``*_created`` (when a series began: the earliest); each family's HELP
    and TYPE once, its samples together after them, families in the order they first appear."""
    families: dict[str, tuple[list[str], dict[str, float]]] = {}
    for text in texts:
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    comments = families.setdefault(family, ([], {}))[0]
                    if line not in comments:
                        comments.append(line)
                continue
            series, _, value = line.rpartition(" ")
            samples = families.setdefault(family, ([], {}))[1]
            number = float(value)
            name = series.split("{", 1)[0]
            if series not in samples:
                samples[series] = number
            elif name.endswith("_created"):
                samples[series] = min(samples[series], number)
            else:
                samples[series] += number
    out = []
    for comments, samples in families.values():
        out += comments
        out += [f"{series} {_number(value)}" for series, value in samples.items()]
    return "\n".join(out) + "\n"


def _number(value: float) -> str:
    return repr(value) if value != int(value) or abs(value) >= 1e16 else f"{value:.1f}"
