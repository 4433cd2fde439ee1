"""Training: encoder fine-tuning and its cross-validation (:mod:`.encoder`), reranker fine-tuning and its
learning curve (:mod:`.reranker`), the LightGBM scorer of the recommender (:mod:`.scorer`).

The top room: it imports search, recommend and evaluate (its folds are scored by the evaluation loop) and
nothing below imports it.
"""
