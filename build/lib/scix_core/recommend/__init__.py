"""The tiered recommender (docs/design.md#recommend): trending, Qdrant recommend, EWMA profile, the
clustered Tier-1 pipeline."""

from scix_core.recommend.recommender import Recommender
from scix_core.recommend.result import RecItem, Recommendations, StageRecord
from scix_core.recommend.state import UserState

__all__ = ["RecItem", "Recommendations", "Recommender", "StageRecord", "UserState"]
