"""The served workbench: ``scix serve`` (docs/api.md)."""
