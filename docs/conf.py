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
    "sphinx.ext.graphviz",
    "sphinx_gallery.gen_gallery",
    "repository_pages",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "requirements.txt", "Doxyfile", "examples/*.ipynb", "examples/*.py",
                    "examples/*.codeobj.json", "examples/*.md5", "examples/*.zip",
                    "sg_execution_times.rst", "examples/sg_execution_times.rst"]
# every problem is an error (scripts/docs.sh runs sphinx-build -W), a
# reference to a symbol that is on no page included (nitpicky); the types of
# metatensor, DLPack, the C library, NumPy and the standard library are
# defined elsewhere. Links between pages and headings are checked by MyST,
# the built site's links by scripts/check_docs_site.py.
nitpicky = True
# (the ones in mtsarray's signatures are described on the C API page, so
# that they show as code links there)
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

# ---- the Python examples, run at build time (sphinx-gallery) -------------
# Each script of examples/python below runs while the site is built; its page
# shows the code, what it printed and its figures. The others need MPI or
# PyTorch (the guides show them with literalinclude, and CI runs them).
sphinx_gallery_conf = {
    "examples_dirs": str(REPOSITORY / "examples" / "python"),
    "gallery_dirs": "examples",
    "filename_pattern": r"(quick_start|training_loop_numpy|tensormap_bridges)\.py$",
    "ignore_pattern": r"(mpi_halo|torch_distributed|training_step)\.py$",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 10**6,  # no run times on the pages: they differ every build
    "show_memory": False,
    "show_signature": False,
    "within_subsection_order": "FileNameSortKey",
}

# ---- figures drawn from their sources (Debian's graphviz) -----------------
graphviz_output_format = "svg"

# ---- HTML -------------------------------------------------------------------
html_theme = "furo"
html_title = f"mtsarray {release}"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
