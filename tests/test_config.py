"""Overrides are coerced to the field's type, or refused with a ConfigError naming the field."""

import pytest

from scix_core.config import Config
from scix_core.errors import ConfigError


def test_a_whole_float_for_an_int_field_becomes_the_int():
    cfg = Config().replace(**{"recommend.cosave_candidates": 100.0})
    assert cfg.recommend.cosave_candidates == 100 and type(cfg.recommend.cosave_candidates) is int


def test_an_int_for_a_float_field_becomes_a_float():
    cfg = Config().replace(**{"recommend.community_weight": 2})
    assert cfg.recommend.community_weight == 2.0 and type(cfg.recommend.community_weight) is float


def test_a_fractional_float_for_an_int_field_is_refused():
    with pytest.raises(ConfigError, match="cosave_candidates: 2.5 is not a whole number"):
        Config().replace(**{"recommend.cosave_candidates": 2.5})
