"""The ``scix`` command line."""
