"""scix_core: a notebook-first workbench for scientific-literature search and recommendation.

Importing the package has no side effects and loads no heavy dependency;
torch, qdrant and psycopg are imported where they are used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
