"""`scix ingest --force` SIGKILLed 8 times — half at seeded random moments, half the moment the build
reaches each of the four phases in turn (real Cranfield papers, real MiniLM, the PostgreSQL mirror on): the
index answers exactly as before after every kill and the next run completes. The stress run is ``python -m
scix_core.bench.kills --kills 200``."""

import pytest

from scix_core.bench.kills import TARGETS, run

pytestmark = [pytest.mark.postgres, pytest.mark.model, pytest.mark.realdata]


#: suite-sized: every phase targeted once (the odd kills, in turn); `make bench-kills` runs 200
KILLS = 8


def test_kills_in_every_phase_lose_nothing(tmp_path, data_dir, postgresql):
    lines = []
    report = run(
        data_dir / "cranfield",
        KILLS,
        tmp_path / "home",
        seed=7,
        limit=60,
        pg_dsn=postgresql.info.dsn,
        log=lines.append,
    )
    assert report.failures == (), "\n".join([*report.failures, *lines])
    assert report.survived == report.kills == KILLS
    killed = {p: n for p, n in report.phases.items() if p != "finished before the kill"}
    assert sum(killed.values()) >= KILLS // 2, report.phases  # kills landed
    assert set(TARGETS) <= set(killed), (
        report.phases
    )  # in every phase, the short ones (vectors, mirror) included
