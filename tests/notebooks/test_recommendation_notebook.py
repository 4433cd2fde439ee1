"""Notebook 06 (recommendation evaluation), executed by nbmake with its own default parameters against real
CiteULike-a and its users' libraries."""

from __future__ import annotations

import pytest

from scix_core.reports import NOTEBOOKS
from tests.notebooks.nbmake import run_notebook

pytestmark = [pytest.mark.model, pytest.mark.realdata]


def test_recommendation_notebook_runs_under_nbmake(citeulike_notebook_home, data_dir, tmp_path):
    run_notebook(NOTEBOOKS["recommendation-eval"], citeulike_notebook_home, data_dir, tmp_path)
