"""A short soak (real Cranfield papers, real MiniLM): three searching threads, a rebuild loop in another
process and an interaction writer; nothing fails, every acknowledged save is there, memory does not grow with
the rebuilds. The long run is ``python -m scix_core.bench.soak --seconds 600``."""

import pytest

from scix_core.bench.soak import run

pytestmark = [pytest.mark.model, pytest.mark.realdata]


def test_searches_rebuilds_and_saves_together(tmp_path, data_dir):
    report = run(data_dir / "cranfield", tmp_path / "home", seconds=25, threads=3, limit=150)
    assert report.errors == (), report.errors[:5]
    assert report.queries > 300 and report.rebuilds >= 2 and report.recommendations >= 10, report.summary()
    assert report.saves_found == report.saves_acknowledged > 0
    warm = report.rss_mb[len(report.rss_mb) // 4]
    # before superseded builds' readers were closed, RSS grew ~12 MB/s here
    assert max(report.rss_mb[len(report.rss_mb) // 4 :]) - warm < 150, report.summary()
