"""The version facts at the ground floor: the package face re-exports them, and nothing below the
commands imports the face (its lazy attributes reach up to ``api``, an import back up the layers)."""

from __future__ import annotations

import grimp

import intake_eval
from intake_eval.core.schema import SCHEMA_VERSION, package_version

# The CLI and its commands stand above ``api``: importing the face from there runs no import back up.
ABOVE_API = ("intake_eval.cli", "intake_eval.commands")


def test_the_face_re_exports_the_ground_floor_versions():
    assert intake_eval.SCHEMA_VERSION == SCHEMA_VERSION == 1
    assert intake_eval.__version__ == package_version() != ""


def test_nothing_below_the_commands_imports_the_package_face():
    graph = grimp.build_graph("intake_eval", cache_dir=None)
    importers = graph.find_modules_that_directly_import("intake_eval")
    assert sorted(module for module in importers if not module.startswith(ABOVE_API)) == []
