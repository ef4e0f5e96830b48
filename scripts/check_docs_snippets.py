#!/usr/bin/env python3
"""The code blocks of the built documentation site, run as a newcomer runs them.

    check_docs_snippets.py python SITE
        every page's Python blocks, pasted one after the other into one fresh
        Python (the interpreter running this script, in an empty folder):
        any error fails. A block whose caption -- the visible line above it
        -- says "needs PyTorch", "needs a GPU", "needs MPI" or "needs
        metatensor-torch" is skipped with that reason when this machine
        lacks it (a GPU: mtsarray.backend_available("cuda")), and so is every
        later block of its page.
    check_docs_snippets.py c PAGE CC [FLAGS...]
        the C blocks of PAGE (the C quick start), concatenated into one file,
        compiled with `CC file.c FLAGS...` and run; what it prints must be
        the page's last `text` block (the output the page shows).

Each prints what it ran and what it skipped; exits 1 on any failure.
"""

import html.parser
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile

NEEDS = re.compile(r"needs (PyTorch|metatensor-torch|a GPU|MPI)", re.IGNORECASE)
# A block that is a part of a script says so: "Part of examples/python/x.py
# ...". It is not run on its own (the script is: python/tests); it must be
# a copy of consecutive lines of that file.
PART_OF = re.compile(r"^Part of (\S+\.py)\b")
REPOSITORY = pathlib.Path(__file__).resolve().parents[1]


def code_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def is_part_of(code, path):
    lines, block = code_lines(path.read_text(encoding="utf-8")), code_lines(code)
    return bool(block) and any(lines[i:i + len(block)] == block for i in range(len(lines) - len(block) + 1))


class CodeBlocks(html.parser.HTMLParser):
    """(language, caption, code) of every highlighted block of a page, in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks = []
        self._language = None
        self._caption = None
        self._in_caption = 0
        self._in_pre = False
        self._depth = 0  # <div> nesting inside a highlight-* block
        self._text = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div" and "code-block-caption" in classes:
            self._in_caption = 1
            self._caption = []
        elif self._in_caption and tag in ("div", "span"):
            self._in_caption += 1
        highlight = next((name for name in classes if name.startswith("highlight-")), None)
        if tag == "div" and highlight is not None and self._language is None:
            self._language = highlight[len("highlight-"):].lower()
            self._depth = 1
        elif tag == "div" and self._language is not None:
            self._depth += 1
        elif tag == "pre" and self._language is not None:
            self._in_pre = True
            self._text = []

    def handle_endtag(self, tag):
        if self._in_caption and tag in ("div", "span"):
            self._in_caption -= 1
            return
        if tag == "pre" and self._in_pre:
            self._in_pre = False
            caption = " ".join("".join(self._caption or []).split()).rstrip("¶").rstrip()
            self.blocks.append((self._language, caption, "".join(self._text)))
            self._caption = None
        elif tag == "div" and self._language is not None:
            self._depth -= 1
            if self._depth == 0:
                self._language = None

    def handle_data(self, data):
        if self._in_caption:
            self._caption.append(data)
        elif self._in_pre:
            self._text.append(data)


def code_blocks(page):
    parser = CodeBlocks()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.blocks


def missing(reason):
    """Why this machine can not run a block that `reason` ("needs a GPU"), or None."""
    what = reason.lower()
    if what in ("pytorch", "metatensor-torch"):
        module = "torch" if what == "pytorch" else "metatensor.torch"
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        return None if found else f"{reason} is not installed"
    if what == "mpi":
        return None if importlib.util.find_spec("mpi4py") is not None else "mpi4py is not installed"
    import mtsarray  # a GPU

    return None if mtsarray.backend_available("cuda") else "no GPU: " + mtsarray.backend_unavailable_reason("cuda")


# Runs the blocks of one page in one namespace, as pasted into one Python.
RUNNER = r"""
import sys, traceback
blocks = BLOCKS
namespace = {"__name__": "__main__"}
sys.argv = ["page"]
for number, code in enumerate(blocks, 1):
    try:
        exec(compile(code, f"<block {number}>", "exec"), namespace)
    except SystemExit as exit:
        if exit.code not in (None, 0):
            print(f"block {number} exited: {exit.code}", file=sys.stderr)
            sys.exit(1)
    except BaseException:
        print(f"block {number} failed:\n{code}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def check_python(site):
    problems = []
    ran = skipped = 0
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site)
        blocks = [(caption, code) for language, caption, code in code_blocks(page)
                  if language in ("python", "python3", "py")]
        runnable = []
        for caption, code in blocks:
            part = PART_OF.match(caption)
            if part is not None:
                source = REPOSITORY / part.group(1)
                if not source.is_file() or not is_part_of(code, source):
                    problems.append(f"{name}: a block says it is part of {part.group(1)}, but is not a copy "
                                    f"of consecutive lines of it")
                else:
                    print(f"  {name}: a part of {part.group(1)} (which CI runs whole): checked as a copy of it")
                continue
            need = NEEDS.search(caption)
            why = missing(need.group(1)) if need else None
            if why is not None:
                later = len(blocks) - len(runnable) - 1
                print(f"  {name}: skipped from block {len(runnable) + 1} on ({later} after it): "
                      f"'{caption}': {why}")
                skipped += 1 + later
                break
            runnable.append(code)
        if not runnable:
            continue
        with tempfile.TemporaryDirectory() as folder:
            result = subprocess.run([sys.executable, "-c", RUNNER.replace("BLOCKS", repr(runnable))],
                                    capture_output=True, text=True, cwd=folder, timeout=600,
                                    env={**os.environ, "MPLBACKEND": "Agg"})
        ran += len(runnable)
        if result.returncode != 0:
            problems.append(f"{name}: {result.stderr.strip()}")
        else:
            print(f"  {name}: {len(runnable)} blocks ran")
    print(f"python: {ran} blocks run, {skipped} skipped (their reasons above)")
    return problems


def check_c(page, compiler, flags):
    blocks = code_blocks(page)
    source = "\n".join(code for language, _, code in blocks if language == "c")
    shown = [code for language, _, code in blocks if language == "text"]
    if not source or not shown:
        return [f"{page}: no C blocks, or no output shown (a `text` block)"]
    with tempfile.TemporaryDirectory() as folder:
        program = pathlib.Path(folder, "page.c")
        program.write_text(source, encoding="utf-8")
        build = subprocess.run([compiler, str(program), "-o", str(program.with_suffix("")), *flags],
                               capture_output=True, text=True)
        if build.returncode != 0:
            return [f"{page}: its C blocks, concatenated, do not compile:\n{build.stderr}"]
        run = subprocess.run([str(program.with_suffix(""))], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        return [f"{page}: the program of its C blocks exited {run.returncode}:\n{run.stdout}{run.stderr}"]
    if run.stdout != shown[-1]:
        return [f"{page}: the program printed\n{run.stdout}but the page shows\n{shown[-1]}"]
    print(f"c: {page.name}: {len(source.splitlines())} lines of C compiled and run; the output is the page's")
    return []


def main(arguments):
    if len(arguments) >= 2 and arguments[0] == "python":
        problems = check_python(pathlib.Path(arguments[1]).resolve())
    elif len(arguments) >= 3 and arguments[0] == "c":
        problems = check_c(pathlib.Path(arguments[1]).resolve(), arguments[2], arguments[3:])
    else:
        print(__doc__)
        return 2
    for problem in problems:
        print(f"  PROBLEM: {problem}")
    print(f"{arguments[0]}: {len(problems)} problems" if problems else f"{arguments[0]}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
