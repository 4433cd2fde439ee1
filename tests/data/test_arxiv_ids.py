import datetime as dt

import pytest

from scix_core.data.arxiv_ids import arxiv_categories, is_arxiv_category, published_from_id, repair_float_id


@pytest.mark.parametrize(
    "arxiv_id, expected",
    [
        ("2103.01234v2", dt.date(2021, 3, 1)),
        ("2103.01234", dt.date(2021, 3, 1)),
        ("0704.0001", dt.date(2007, 4, 1)),
        ("hep-th/9901001", dt.date(1999, 1, 1)),
        ("math.NT/0512345v3", dt.date(2005, 12, 1)),
        ("arXiv:1812.00001", dt.date(2018, 12, 1)),
        ("not-an-id", None),
        ("2113.00001", None),  # month 13
    ],
)
def test_published_from_id(arxiv_id, expected):
    assert published_from_id(arxiv_id) == expected


def test_category_filter_keeps_arxiv_codes_in_order():
    assert arxiv_categories(["cs.AI", "I.2.7", "68T50", "cs.CL", "es: 68T05, 68T50", "cs.AI"]) == (
        "cs.AI",
        "cs.CL",
    )
    assert arxiv_categories("hep-ph math.NT") == ("hep-ph", "math.NT")
    assert is_arxiv_category("astro-ph.GA") and is_arxiv_category("gr-qc") and not is_arxiv_category("H.3.3")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("704.001", "0704.0010"),
        ("704.0001", "0704.0001"),
        ("704.2", "0704.2000"),
        ("0704.0010", "0704.0010"),
        ("1501.0001", "1501.00010"),
        ("hep-th/9901001", "hep-th/9901001"),
    ],
)
def test_repair_float_id(raw, expected):
    assert repair_float_id(raw) == expected


def test_kaggle_update_date():
    from scix_core.data.arxiv import parse_update_date

    assert parse_update_date("5/23/2007") == dt.date(2007, 5, 23)
    assert parse_update_date("2007-05-23") is None
