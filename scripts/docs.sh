#!/usr/bin/env bash
# Builds the documentation site (docs/) and checks it, alone: what
# scripts/test.sh runs as its "documentation" stage.
#
#   1. Doxygen reads the public headers (docs/Doxyfile): any warning fails,
#      an undocumented public symbol among them;
#   2. sphinx-build -W --keep-going: the guides, the reference pages (Breathe
#      for C and C++, autodoc for the installed Python package), the
#      changelog and the benchmark results; sphinx-gallery runs the Python
#      examples (docs/conf.py) and graphviz draws docs/figures/*.dot;
#   3. every internal link and image of the site leads somewhere, every
#      documented symbol of the headers and every public Python name (with a
#      docstring) is on a reference page (scripts/check_docs_site.py);
#   4. the README files: their relative links lead somewhere, and their code
#      blocks are copies of the examples CI runs (check_docs_site.py readme);
#   5. every Python block of every page runs, the blocks of a page pasted in
#      order into one Python (scripts/check_docs_snippets.py; the C quick
#      start's blocks are compiled and run by scripts/test.sh, against the
#      installed library);
#   6. headless Chromium renders the home page, the C API, the Python API,
#      the streams guide, the quick starts and the guides with Python code to
#      PNGs in artefacts/docs/, and each must show its headings and not be
#      blank.
#
# Usage: bash scripts/docs.sh        then open build/docs/html/index.html
# The Python reference documents the mtsarray package installed in the venv;
# without one (or one of another version), this script installs it from
# python/ first (a build of the library).
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DOCS_DIR="$BUILD_DIR/docs"
XML_DIR="$DOCS_DIR/doxygen/xml"
HTML_DIR="$DOCS_DIR/html"
SCREENSHOTS_DIR="$REPO_ROOT/artefacts/docs"

timed() {
    local what="$1" start=$SECONDS
    shift
    log "$what"
    "$@"
    printf '    (%s: %ds)\n' "$what" "$((SECONDS - start))"
}

cmake_version() {
    sed -n 's/^project(mtsarray VERSION \([0-9.]*\).*/\1/p' "$REPO_ROOT/CMakeLists.txt"
}

ensure_python_package() {
    local installed
    installed="$(cd / && "$VENV_PYTHON" -c 'import mtsarray; print(mtsarray.__version__)' 2>/dev/null || true)"
    if [[ "$installed" == "$(cmake_version)" ]]; then
        log "the mtsarray package in the venv: $installed"
        return
    fi
    log "pip install ./python (the Python reference documents the installed package; found '${installed:-none}')"
    local -a reuse=()
    if [[ -f "$BUILD_DIR/CMakeCache.txt" && -f "$BUILD_DIR/include/mtsarray/config.h" ]]; then
        # the library of the build folder (run.sh's or test.sh's): only the
        # extension is compiled (python/CMakeLists.txt, MTSARRAY_LIBRARY_BUILD_DIR)
        echo "    on the library of $BUILD_DIR (cmake --build --target mtsarray), then the extension alone"
        cmake --build "$BUILD_DIR" -j"$JOBS" --target mtsarray
        reuse=(-C "cmake.define.MTSARRAY_LIBRARY_BUILD_DIR=$BUILD_DIR")
    else
        echo "    no build folder at $BUILD_DIR: the library is compiled too (about 3 minutes on 2 cores;"
        echo "    scripts/run.sh first makes this step take seconds); pip's build output follows"
    fi
    CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$VENV_PYTHON" -m pip install --disable-pip-version-check \
        --no-build-isolation --no-deps "$([[ ${#reuse[@]} -gt 0 ]] && echo --quiet || echo --verbose)" \
        -C "build-dir=$BUILD_DIR/python-package" "${reuse[@]}" "$REPO_ROOT/python"
}

run_doxygen() {
    rm -rf "$DOCS_DIR/doxygen"
    mkdir -p "$DOCS_DIR/doxygen"
    # WARN_AS_ERROR = FAIL_ON_WARNINGS (docs/Doxyfile): doxygen exits non-zero
    (cd "$REPO_ROOT" && { cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $DOCS_DIR/doxygen"; } | doxygen -)
}

run_sphinx() {
    # -E -a: every page read and written again, so that each warning shows on
    # every run, not only on the run after its page changed
    MTSARRAY_DOXYGEN_XML="$XML_DIR" "$VENV_DIR/bin/sphinx-build" -E -a -W --keep-going -n -q \
        -b html "$REPO_ROOT/docs" "$HTML_DIR"
}

# Every Python block of every page, pasted in order into one fresh Python
# per page (the blocks that say they need PyTorch, a GPU or MPI are skipped
# where those are missing, with the reason).
check_snippets() {
    (cd / && "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_snippets.py" python "$HTML_DIR")
}

check_site() {
    "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_site.py" links "$HTML_DIR"
    (cd / && "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_site.py" reference "$HTML_DIR" "$XML_DIR")
    "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_site.py" readme "$REPO_ROOT/README.md" "$REPO_ROOT/python/README.md"
}

take_screenshots() {
    local chromium page
    chromium="$(command -v chromium || command -v chromium-browser || true)"
    [[ -n "$chromium" ]] || die "chromium not found (apt-get install chromium; scripts/setup.sh does)"
    rm -rf "$SCREENSHOTS_DIR"
    mkdir -p "$SCREENSHOTS_DIR"
    for page in index.html reference/c-api.html reference/python-api.html guides/streams.html \
        guides/which-call.html guides/quick-start-c.html guides/quick-start-cpp.html guides/quick-start-fortran.html \
        guides/training-loops.html guides/tensormaps-python.html \
        examples/quick_start.html examples/training_loop_numpy.html; do
        local png="$SCREENSHOTS_DIR/${page//\//-}"
        png="${png%.html}.png"
        # a profile of its own, no sandbox (CI runs as root), nothing from the network
        timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --no-first-run --user-data-dir="$DOCS_DIR/chromium-profile" \
            --window-size=1280,1600 --screenshot="$png" "file://$HTML_DIR/$page" >/dev/null 2>&1 ||
            die "chromium could not render $page"
        echo "    $page -> ${png#"$REPO_ROOT"/}"
    done
    "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_site.py" pages "$HTML_DIR" "$SCREENSHOTS_DIR"
}

if [[ "${MTSARRAY_DOCS_SKIP_SETUP:-}" != 1 ]]; then
    bash "$REPO_ROOT/scripts/setup.sh"
fi
start=$SECONDS
ensure_python_package
timed "doxygen (warnings are errors)" run_doxygen
timed "sphinx-build -W --keep-going" run_sphinx
timed "links, reference coverage, docstrings, READMEs" check_site
timed "the Python blocks of every page, run in order" check_snippets
timed "screenshots (headless Chromium) and their check" take_screenshots
log "documentation built in $((SECONDS - start))s: open $HTML_DIR/index.html"
