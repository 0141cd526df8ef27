"""Sphinx configuration for the gluonkit documentation.

Built in CI with ``python -m sphinx -W --keep-going -q -b html docs docs/_build/html``:
warnings are errors.  Only Sphinx and its bundled extensions are used; ``_ext/`` holds our
own (``layout_picture``: pictures of layouts computed at build time; ``timeline_picture``:
interpreter timelines of examples, recorded at build time; ``checker_report``: what gluonkit
reports for a planted bug, produced at build time).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository root: autodoc imports gluonkit uninstalled
sys.path.insert(0, os.path.join(HERE, "_ext"))

project = "gluonkit"
author = "the gluonkit developers"
copyright = "2026, the gluonkit developers"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "layout_picture",
    "timeline_picture",
    "checker_report",
]

exclude_patterns = ["_build"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
html_theme = "alabaster"
html_theme_options = {"page_width": "1100px", "sidebar_width": "220px"}
