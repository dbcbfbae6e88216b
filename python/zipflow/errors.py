"""The exceptions zipflow raises. Each message is the one line the `zipflow` command prints:
it names the file, column and chunk where something was wrong."""


class ZipflowError(Exception):
    """Base class of zipflow's own errors."""


class CorruptFileError(ZipflowError):
    """Bytes that do not decode or whose checksum does not match: a damaged or foreign file."""


class UnsupportedError(ZipflowError, NotImplementedError):
    """Something zipflow does not implement: a type, a plan for a type, a newer file version."""


class InvalidInputError(ZipflowError, ValueError):
    """Invalid arguments or input data: an unknown column, a plan that does not parse or fit."""


class QueryError(ZipflowError, ValueError):
    """A query that does not parse or plan, or names a table or column that does not exist."""


__all__ = [
    "ZipflowError",
    "CorruptFileError",
    "UnsupportedError",
    "InvalidInputError",
    "QueryError",
]
