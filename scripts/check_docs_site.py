#!/usr/bin/env python3
"""Checks of the built documentation site (scripts/docs.sh runs them all).

    check_docs_site.py links SITE
        every internal link and image of every page leads somewhere: the file
        exists and, for a link with a #fragment, the page has that id.
        Offline: external links (http, https, mailto) are not followed.
    check_docs_site.py reference SITE DOXYGEN_XML
        every documented public symbol of the C and C++ headers (Doxygen's
        XML) and every public name of the Python package (with the members
        of its classes) is on a reference page (the site's objects.inv), and
        every public Python name has a docstring.
    check_docs_site.py pages SITE SCREENSHOTS
        the pages that scripts/docs.sh rendered with Chromium show their
        content: the HTML has the headings the page must have, and the PNG is
        not blank (more than one colour, and text where the page's content is).
    check_docs_site.py readme MARKDOWN...
        the front pages of the repository (README.md, python/README.md): every
        relative link leads to a file or folder of the repository, and every
        code block announced by `<!-- snippet: PATH -->` is a copy of PATH, a
        file CI compiles or runs: its lines, indentation and blank lines aside,
        are consecutive lines of PATH (whose literalinclude markers, such as
        `/* [step 2] */`, and sphinx-gallery text cells are not code).

Each prints what it checked, and every problem it finds; exits 1 if any.
"""

import html.parser
import pathlib
import re
import sys
import urllib.parse
import xml.etree.ElementTree as ElementTree
import zlib

# ---- the pages ----------------------------------------------------------------


class PageParser(html.parser.HTMLParser):
    """The ids, the links and the headings of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (attribute, value)
        self.headings = []
        self._heading = None
        self._skip = 0  # inside a heading's permalink

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name in ("id", "name"):
            if attributes.get(name):
                self.ids.add(attributes[name])
        for name in ("href", "src"):
            if attributes.get(name) is not None and tag in ("a", "img", "link", "script", "source"):
                self.links.append((name, attributes[name]))
        if re.fullmatch(r"h[1-4]", tag):
            self._heading = []
        elif self._heading is not None and "headerlink" in (attributes.get("class") or ""):
            self._skip += 1

    def handle_endtag(self, tag):
        if re.fullmatch(r"h[1-4]", tag) and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None
        elif tag == "a" and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if self._heading is not None and not self._skip:
            self._heading.append(data)


def parse_page(path):
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def check_links(site):
    pages = {path: parse_page(path) for path in sorted(site.rglob("*.html"))}
    problems = []
    checked = 0
    for path, page in pages.items():
        for attribute, value in page.links:
            url = urllib.parse.urlsplit(value)
            if url.scheme or value.startswith("//"):
                continue  # external (http, https, mailto, data): not followed offline
            checked += 1
            where = f"{path.relative_to(site)}: {attribute}='{value}'"
            target = path if url.path == "" else (path.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{where}: no such file ({target})")
                continue
            if url.fragment and target.suffix == ".html":
                target_page = pages.get(target) or parse_page(target)
                if urllib.parse.unquote(url.fragment) not in target_page.ids:
                    problems.append(f"{where}: {target.relative_to(site)} has no id '{url.fragment}'")
    print(f"links: {checked} internal links and images on {len(pages)} pages checked")
    return problems


# ---- the reference --------------------------------------------------------------


def read_inventory(site):
    """{(domain:role, name)} of the site's objects.inv (Sphinx's format 2)."""
    data = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    entries = set()
    for line in zlib.decompress(data[header_end:]).decode("utf-8").splitlines():
        match = re.match(r"(.+?)\s+(\S+:\S+)\s+(-?\d+)\s+(\S+)\s+(.*)", line)
        if match:
            entries.add((match.group(2), match.group(1)))
    return entries


def documented(memberdef):
    text = "".join(memberdef.find("briefdescription").itertext()) + "".join(
        memberdef.find("detaileddescription").itertext())
    return text.strip() != ""


def doxygen_symbols(xml):
    """(kind, qualified name, domain) of every documented public symbol."""
    symbols = []
    for path in sorted(xml.glob("*.xml")):
        if path.name in ("index.xml", "Doxyfile.xml"):
            continue
        for compound in ElementTree.parse(path).getroot().iter("compounddef"):
            kind = compound.get("kind")
            name = compound.findtext("compoundname")
            if compound.get("prot", "public") != "public":
                continue
            language = compound.get("language")
            domain = "cpp" if language == "C++" and kind != "file" else "c"
            if kind in ("class", "struct"):
                if "::details" in name or not documented(compound):
                    continue
                domain = "cpp" if "::" in name else "c"
                symbols.append((kind, name, domain))
            elif kind not in ("file", "namespace"):
                continue
            if kind == "file" and name.endswith(".hpp"):
                continue  # its namespace lists the same members
            if kind == "namespace" and name != "mtsarray":
                continue
            for member in compound.iter("memberdef"):
                if member.get("prot") != "public" or not documented(member):
                    continue
                if "=delete" in (member.findtext("argsstring") or "").replace(" ", ""):
                    continue
                member_name = member.findtext("name")
                qualified = f"{name}::{member_name}" if kind in ("class", "namespace") or "::" in name else member_name
                if kind == "struct" and "::" not in name:
                    qualified = f"{name}.{member_name}"
                symbols.append((member.get("kind"), qualified, "cpp" if "::" in qualified else "c"))
    return symbols


def check_reference(site, xml):
    inventory = read_inventory(site)
    names = {(role.split(":")[0], name) for role, name in inventory}
    problems = []
    symbols = doxygen_symbols(xml)
    for kind, name, domain in symbols:
        if (domain, name) not in names:
            problems.append(f"{kind} {name} ({domain}) is documented in the headers but on no reference page")
    print(f"reference: {len(symbols)} documented public C and C++ symbols")

    import inspect

    import mtsarray

    public = [name for name in mtsarray.__all__ if name != "__version__"]
    checked = 0
    for name in public:
        value = getattr(mtsarray, name)
        members = [(f"mtsarray.{name}", value)]
        if inspect.isclass(value) and not issubclass(value, BaseException):
            for member, member_value in vars(value).items():
                if member.startswith("_") and member not in ("__dlpack__", "__dlpack_device__", "__array__",
                                                              "__len__", "__call__"):
                    continue
                if type(value).__name__.endswith("EnumType") or isinstance(member_value, value):
                    continue  # an enumerator: a value, documented by its enumeration
                members.append((f"mtsarray.{name}.{member}", member_value))
        for qualified, member_value in members:
            checked += 1
            if not (inspect.getdoc(member_value) or "").strip():
                problems.append(f"{qualified} has no docstring")
            if ("py", qualified) not in names:
                problems.append(f"{qualified} is on no reference page")
    if ("py", "mtsarray.__version__") not in names:
        problems.append("mtsarray.__version__ is on no reference page")
    print(f"reference: {checked} public Python names and members")
    problems += check_versions(site, mtsarray)
    return problems


def check_versions(site, mtsarray):
    """One version everywhere: CMake's project(), the package's metadata and
    __version__ (the C library's mtsarray_version()), and the site."""
    import importlib.metadata

    text = (pathlib.Path(__file__).resolve().parents[1] / "CMakeLists.txt").read_text(encoding="utf-8")
    cmake = re.search(r"project\(mtsarray\s+VERSION\s+([0-9.]+)", text).group(1)
    found = {
        "CMakeLists.txt project()": cmake,
        "the package's metadata": importlib.metadata.version("mtsarray"),
        "mtsarray.__version__ (mtsarray_version())": mtsarray.__version__,
    }
    title = re.search(r"<title>([^<]*)</title>", (site / "index.html").read_text(encoding="utf-8"))
    site_version = re.search(r"mtsarray ([0-9]+\.[0-9]+\.[0-9]+)", title.group(1) if title else "")
    found["the site's title"] = site_version.group(1) if site_version else "none"
    print("versions: " + ", ".join(f"{where} {version}" for where, version in found.items()))
    if len(set(found.values())) != 1:
        return [f"the versions differ: {found}"]
    return []


# ---- the rendered pages ---------------------------------------------------------

# page -> headings it must show (h1 first)
PAGES = {
    "index.html": ["mtsarray", "Start here"],
    "reference/c-api.html": ["C API", "Making arrays", "Movement plans", "Host threads"],
    "reference/python-api.html": ["Python API", "Making arrays", "Arrays", "Movement plans"],
    "guides/streams.html": ["Streams and DLPack stream numbers", "Stream numbers", "When two streams meet"],
    "guides/which-call.html": ["Which call when", "How data flows", "Moving rows: move_data or a movement plan",
                               "When to set a stream"],
    "guides/quick-start-c.html": ["Quick start in C", "0. The includes and the helpers", "What it prints"],
    "guides/quick-start-cpp.html": ["Quick start in C++", "0. The helpers", "What it prints"],
    "guides/quick-start-fortran.html": ["Quick start in Fortran", "What it prints"],
    "guides/training-loops.html": ["GPU use inside training loops", "A training loop with NumPy only",
                                   "The same loop with PyTorch, on the GPU"],
    "guides/tensormaps-python.html": ["TensorMaps in Python", "The TensorMap of this page"],
    "examples/quick_start.html": ["Quick start in Python", "1. Arrays", "5. Errors"],
    "examples/training_loop_numpy.html": ["A training loop with NumPy only", "The loop", "The loss curve"],
}


def screenshot_name(page):
    return page.replace("/", "-").replace(".html", ".png")


def check_pages(site, screenshots):
    from PIL import Image

    problems = []
    for page, expected in PAGES.items():
        headings = parse_page(site / page).headings
        if not headings or headings[0] != expected[0]:
            problems.append(f"{page}: the first heading is {headings[:1]}, not '{expected[0]}'")
        for heading in expected[1:]:
            if heading not in headings:
                problems.append(f"{page}: no heading '{heading}' (has {headings})")

        path = screenshots / screenshot_name(page)
        if not path.is_file():
            problems.append(f"{page}: no screenshot {path}")
            continue
        image = Image.open(path).convert("RGB")
        width, height = image.size
        colours = image.getcolors(maxcolors=1 << 20) or []
        background = max(colours)[1] if colours else None
        # the content column, right of the navigation: text must be there
        content = image.crop((width // 4, 0, width * 9 // 10, height // 2))
        pixels = content.width * content.height
        inked = sum(count for count, colour in content.getcolors(maxcolors=1 << 20) or [] if colour != background)
        share = inked / pixels
        print(f"pages: {page}: {width}x{height}, {len(colours)} colours, "
              f"{100 * share:.1f} % of the content column not background; headings {headings[:4]}")
        if len(colours) < 16:
            problems.append(f"{path.name}: {len(colours)} colours: a blank page")
        elif share < 0.02:
            problems.append(f"{path.name}: the content column is {100 * share:.2f} % ink: no text rendered")
    return problems


# ---- the README files ---------------------------------------------------------

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
SNIPPET = re.compile(r"^<!-- snippet: (\S+) -->$")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
INCLUDE_MARKER = re.compile(r"^(/\* \[[\w -]+\] \*/|# \[[\w -]+\])$")


def code_lines(lines):
    """The lines that carry code: stripped, without blank lines, include
    markers and the text cells of sphinx-gallery (`# %%` and the comment
    lines right after it, the prose of the example's page)."""
    code = []
    in_text_cell = False
    for line in (line.strip() for line in lines):
        if line == "# %%":
            in_text_cell = True
            continue
        if in_text_cell and line.startswith("#"):
            continue
        in_text_cell = False
        if line and not INCLUDE_MARKER.match(line):
            code.append(line)
    return code


def contains_run(lines, run):
    return any(lines[start:start + len(run)] == run for start in range(len(lines) - len(run) + 1))


def check_readme(markdown):
    problems = []
    lines = markdown.read_text(encoding="utf-8").splitlines()
    name = markdown.relative_to(REPOSITORY) if markdown.is_relative_to(REPOSITORY) else markdown
    in_code = False
    snippets = 0
    for number, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in MARKDOWN_LINK.findall(line):
            if re.match(r"^(https?:|mailto:|#)", target):
                continue
            if not (markdown.parent / target.split("#")[0]).exists():
                problems.append(f"{name}:{number + 1}: the link '{target}' leads to no file of the repository")
        match = SNIPPET.match(line)
        if match is None:
            continue
        snippets += 1
        source = REPOSITORY / match.group(1)
        if number + 1 >= len(lines) or not lines[number + 1].startswith("```"):
            problems.append(f"{name}:{number + 1}: no code block right after the snippet marker")
            continue
        if not source.is_file():
            problems.append(f"{name}:{number + 1}: the snippet's file {match.group(1)} does not exist")
            continue
        end = next((i for i in range(number + 2, len(lines)) if lines[i].startswith("```")), len(lines))
        block = code_lines(lines[number + 2:end])
        if not block or not contains_run(code_lines(source.read_text(encoding="utf-8").splitlines()), block):
            problems.append(f"{name}:{number + 1}: the code block is not a copy of {match.group(1)} "
                            f"(its lines must be consecutive lines of the file)")
    print(f"readme: {name}: {snippets} snippets and the relative links checked")
    return problems


def main(arguments):
    if len(arguments) < 2 or arguments[0] not in ("links", "reference", "pages", "readme"):
        print(__doc__)
        return 2
    if arguments[0] == "readme":
        problems = [problem for path in arguments[1:] for problem in check_readme(pathlib.Path(path).resolve())]
        return report(arguments[0], problems)
    site = pathlib.Path(arguments[1]).resolve()
    if arguments[0] == "links":
        problems = check_links(site)
    elif arguments[0] == "reference":
        problems = check_reference(site, pathlib.Path(arguments[2]))
    else:
        problems = check_pages(site, pathlib.Path(arguments[2]))
    return report(arguments[0], problems)


def report(check, problems):
    for problem in problems:
        print(f"  PROBLEM: {problem}")
    if problems:
        print(f"{check}: {len(problems)} problems")
        return 1
    print(f"{check}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
