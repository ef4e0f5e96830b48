"""Sphinx configuration of the mtsarray documentation.

Built by scripts/docs.sh, which runs Doxygen first (docs/Doxyfile) and
passes its XML folder in MTSARRAY_DOXYGEN_XML; the Python reference imports
the installed `mtsarray` package (autodoc).
"""

import os
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parent
REPOSITORY = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))


def library_version() -> str:
    """The version of CMake's project(), the one every other copy follows."""
    text = (REPOSITORY / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(mtsarray\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", text)
    if match is None:
        raise RuntimeError("no project(mtsarray VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


project = "mtsarray"
author = "the mtsarray developers"
copyright = "the mtsarray developers"
release = library_version()
version = release

extensions = [
    "breathe",
    "myst_parser",
    "sphinx.ext.autodoc",
    "repository_pages",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "requirements.txt", "Doxyfile"]
# every problem is an error (scripts/docs.sh runs sphinx-build -W), a
# reference to a symbol that is on no page included (nitpicky); the types of
# metatensor, DLPack, the C library, NumPy and the standard library are
# defined elsewhere. Links between pages and headings are checked by MyST,
# the built site's links by scripts/check_docs_site.py.
nitpicky = True
_foreign_c = r"(mts_\w+|DL\w+|u?int\d+_t|uintptr_t|size_t|bool)"
nitpick_ignore_regex = [
    ("c:identifier", _foreign_c),
    # the C types in C++ signatures; `mtsarray` is the namespace of the names
    ("cpp:identifier", _foreign_c + r"|metatensor(::\w+)?|mtsarray_move_plan_t|mtsarray"),
    ("py:class", r"(numpy|collections\.abc|typing_extensions|metatensor)\..*"),
]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# ---- the C and C++ reference: Doxygen's XML through Breathe ----------------
doxygen_xml = os.environ.get("MTSARRAY_DOXYGEN_XML", str(REPOSITORY / "build" / "docs" / "doxygen" / "xml"))
if not pathlib.Path(doxygen_xml, "index.xml").is_file():
    raise RuntimeError(f"no Doxygen XML in {doxygen_xml}: build the documentation with scripts/docs.sh")
breathe_projects = {"mtsarray": doxygen_xml}
breathe_default_project = "mtsarray"
breathe_domain_by_extension = {"h": "c", "in": "c", "hpp": "cpp"}
breathe_default_members = ("members",)
breathe_show_include = False
# DLPack and metatensor types in the signatures are not ours to define
c_extra_keywords = []
cpp_index_common_prefix = ["mtsarray::"]

# ---- the Python reference -------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False}

# ---- HTML -------------------------------------------------------------------
html_theme = "furo"
html_title = f"mtsarray {release}"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
