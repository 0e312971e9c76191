"""The version facts every layer may read: the run folder's schema version and the installed
package's version.

They live at the ground floor so nothing below the package face imports the face (whose lazy
attributes reach up to ``api``). ``intake_eval.SCHEMA_VERSION`` and ``intake_eval.__version__``
re-export these.
"""

from __future__ import annotations

# The shape of a run folder's records and manifest.json; a reader refuses a folder of another version.
SCHEMA_VERSION = 1

DISTRIBUTION = "intake-eval"


def package_version() -> str:
    """The installed intake-eval's version (pyproject.toml is its only source)."""
    from importlib.metadata import version  # on first use: `import intake_eval` and `--help` stay light

    return version(DISTRIBUTION)
