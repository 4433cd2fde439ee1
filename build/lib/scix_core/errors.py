"""Typed errors raised at the package's boundaries.

Every error a user can provoke (bad path, unknown format, corrupt file,
unreachable server, missing model) is a :class:`ScixError` subclass whose
message says what went wrong and what to do about it.
"""

from __future__ import annotations


class ScixError(Exception):
    """Base class of every error scix_core raises on purpose."""

    code = "scix_error"

    def describe(self) -> str:
        """``code: message`` on one line, the form used in result metadata."""
        return f"{self.code}: {' '.join(str(self).split())}"


class ConfigError(ScixError):
    """A configuration value is missing, malformed or out of range."""

    code = "config_error"


class UnknownNameError(ScixError, KeyError):
    """A registry lookup failed; the message lists the valid names."""

    code = "unknown_name"

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...]):
        self.kind, self.name, self.valid = kind, name, tuple(sorted(valid))
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class DataPathError(ScixError, FileNotFoundError):
    """A data path does not exist or is not the kind of path expected."""

    code = "data_path_error"


class DataFormatError(ScixError):
    """A data file is corrupt, truncated or not in the declared format."""

    code = "data_format_error"

    def __init__(self, path: object, line: int | None, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


class ChecksumError(ScixError):
    """A downloaded file does not match its published checksum."""

    code = "checksum_error"


class IndexNotFoundError(ScixError):
    """No built index of that name exists in the workspace."""

    code = "index_not_found"


class IndexBusyError(ScixError):
    """Another process is building the same index; nothing was changed."""

    code = "index_busy"


class ModelUnavailableError(ScixError):
    """An embedding or reranking model cannot be loaded."""

    code = "model_unavailable"


class MissingExtraError(ScixError):
    """An optional part needs a package its install left out; the message names the extra to install."""

    code = "missing_extra"


class BackendUnavailableError(ScixError):
    """A storage or vector backend cannot be reached or opened."""

    code = "backend_unavailable"


class QueryError(ScixError):
    """A search query is empty or unusable."""

    code = "invalid_query"


class FilterError(ScixError):
    """A search filter names an unknown key or an impossible range."""

    code = "invalid_filter"


class VectorIndexUnavailableError(ScixError):
    """Semantic search was asked for but the index has no usable dense lane."""

    code = "vector_index_unavailable"


class ReportError(ScixError):
    """A report notebook failed to execute; the failed notebook is kept for inspection."""

    code = "report_failed"


class UnknownUserError(ScixError):
    """No user of that id in that index's user state."""

    code = "unknown_user"


class UnknownPaperError(ScixError):
    """A paper id is not in the index it was used with."""

    code = "unknown_paper"


class InteractionError(ScixError):
    """An interaction or user record is malformed: bad kind, timestamp, user id or category."""

    code = "invalid_interaction"
