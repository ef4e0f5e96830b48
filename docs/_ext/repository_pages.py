"""Pages of the site that are files of the repository, read at build time.

The changelog page is CHANGELOG.md and the performance page is
bench/README.md (its method, current tables and plots), so that no figure
is copied into the documentation by hand. Their links are written for the
repository; each is rewritten to the page or image it names on the site,
and a link this module does not know stops the build (it would be broken on
the site).
"""

import pathlib
import re

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


class RepositoryPage:
    def __init__(self, path, links, title=None, introduction="", images=None):
        self.path = path
        # link prefix as written in the file -> the same target on the site
        self.links = links
        self.title = title
        self.introduction = introduction
        # a folder of the repository whose PNGs are shown at the end of the
        # page (the file links to them; the site shows them)
        self.images = images


PAGES = {
    "changelog": RepositoryPage(
        "CHANGELOG.md",
        {"bench/README.md": "performance.md"},
    ),
    "performance": RepositoryPage(
        "bench/README.md",
        {"../CHANGELOG.md": "changelog.md", "plots/": "../bench/plots/", "../docs/": ""},
        title="Performance",
        images="bench/plots",
        introduction=(
            "What follows is `bench/README.md` of the repository, as it stands in this version: the "
            "headline ratios, the plots and the current results first, then how the benchmarks measure "
            "(every figure a ratio to a limit or a baseline measured in the same process), how to run "
            "them and their targets."
        ),
    ),
}

LINK = re.compile(r"(\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^(```|~~~)")


def rewrite_links(text, page, docname):
    def replace(match):
        target = match.group(2)
        if re.match(r"^(https?:|mailto:|#)", target):
            return match.group(0)
        for prefix, site_target in page.links.items():
            if target.startswith(prefix):
                return match.group(1) + site_target + target[len(prefix):] + match.group(3)
        raise ExtensionError(
            f"{page.path} links to '{target}', which the page '{docname}' can not reach on the site: "
            f"add it to PAGES in {pathlib.Path(__file__).name}"
        )

    return LINK.sub(replace, text)


def shift_headings(text):
    """One level down, outside code blocks: the page's own title goes first."""
    lines = []
    in_code = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            line = "#" + line
        lines.append(line)
    return "\n".join(lines) + "\n"


def read_page(app, docname, source):
    page = PAGES.get(docname)
    if page is None:
        return
    path = REPOSITORY / page.path
    app.env.note_dependency(str(path))
    text = rewrite_links(path.read_text(encoding="utf-8"), page, docname)
    if page.title is not None:
        text = f"# {page.title}\n\n{page.introduction}\n\n" + shift_headings(text)
    if page.images is not None:
        for image in sorted((REPOSITORY / page.images).glob("*.png")):
            app.env.note_dependency(str(image))
            relative = pathlib.PurePosixPath("..", page.images, image.name)
            text += f"\n![{image.stem}]({relative})\n"
    source[0] = text


def setup(app: Sphinx):
    app.connect("source-read", read_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
