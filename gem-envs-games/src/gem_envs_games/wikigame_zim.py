"""WikiGame pages from a ZIM file (the offline format kiwix uses for Wikipedia), read with libzim.

:class:`ZimWiki` opens any ZIM (a full Wikipedia dump, or the tiny one below): a page is
an HTML article; its text is the article's text, its links the other articles it links
to (relative hrefs that resolve to an article in the same file, redirects followed).
Random pages are drawn by entry index from the env's own RNG, so episodes replay.

:func:`write_zim` builds a ZIM with libzim's own writer; :func:`tiny_zim` builds (once,
into the data cache) the small linked corpus the default ids use, so WikiGame runs with
no download at all.
"""

from __future__ import annotations

import html
import os
import posixpath
import random
import subprocess
import sys
import threading
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: the most characters of an article's text kept (a full Wikipedia article can be huge)
MAX_TEXT = 20_000
#: the most links kept per page
MAX_LINKS = 500


@dataclass(frozen=True)
class WikiPage:
    """One article: its id (the path an agent types), title, plain text and outgoing links (ids)."""

    page_id: str
    title: str
    content: str
    links: list[str]


class _ArticleParser(HTMLParser):
    """Text and hrefs of an article body, in one pass (no regex over untrusted HTML)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.hrefs: list[str] = []
        self._skip = 0
        self._size = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag == "a" and len(self.hrefs) < 4 * MAX_LINKS:
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self._skip:
            self._skip -= 1
        elif tag in ("p", "li", "h1", "h2", "h3", "br", "div"):
            self.text.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip and self._size < MAX_TEXT:
            self.text.append(data)
            self._size += len(data)


class ZimWiki:
    """Articles of one ZIM file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from libzim.reader import Archive

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"WikiGame: no ZIM file at {path}. Pass zim_path= a Wikipedia ZIM (kiwix's "
                                    "downloads, e.g. wikipedia_en_simple_all_nopic.zim) or omit it for the tiny "
                                    "offline corpus.")
        self.path = path
        self.archive = Archive(str(path))
        self._lock = threading.Lock()
        self._cache: dict[str, WikiPage | None] = {}

    def _resolve(self, page_id: str):
        archive = self.archive
        for candidate in (page_id, f"A/{page_id}"):
            if archive.has_entry_by_path(candidate):
                entry = archive.get_entry_by_path(candidate)
                for _ in range(8):  # redirect chains are short; loops end here
                    if not entry.is_redirect:
                        break
                    entry = entry.get_redirect_entry()
                if entry.is_redirect:
                    return None
                item = entry.get_item()
                return entry if item.mimetype.startswith("text/html") else None
        return None

    def get_page(self, page_id: str) -> WikiPage | None:
        """The article ``page_id`` (its path, with or without the old ``A/`` namespace), or None."""
        if not page_id or len(page_id) > 1000:
            return None
        with self._lock:
            if page_id in self._cache:
                return self._cache[page_id]
            page = self._load(page_id)
            self._cache[page_id] = page
            if len(self._cache) > 4096:
                self._cache.clear()
            return page

    def _load(self, page_id: str) -> WikiPage | None:
        entry = self._resolve(page_id)
        if entry is None:
            return None
        parser = _ArticleParser()
        parser.feed(bytes(entry.get_item().content).decode("utf-8", errors="replace"))
        here = entry.path
        links: list[str] = []
        for href in parser.hrefs:
            target = _article_path(here, href)
            found = self._resolve(target) if target else None
            # the linked article's own id: redirects and namespace spellings all name one page
            link = _short(found.path) if found is not None else None
            if link and link not in links and link != _short(here):
                links.append(link)
                if len(links) >= MAX_LINKS:
                    break
        text = " ".join(" ".join(parser.text).split())
        return WikiPage(_short(entry.path), entry.title, text, links)

    def random_page(self, rng: random.Random, tries: int = 200) -> WikiPage | None:
        """A random article with at least one link, drawn by entry index from ``rng``."""
        count = self.archive.all_entry_count
        for _ in range(tries):
            entry = self.archive._get_entry_by_id(rng.randrange(count))
            if entry.is_redirect or "disambiguation" in entry.title.lower():
                continue
            page = self.get_page(_short(entry.path))
            if page is not None and page.links:
                return page
        return None


def _short(path: str) -> str:
    return path[2:] if path.startswith("A/") else path


def _article_path(here: str, href: str) -> str | None:
    """The article path an href points to, relative to the page at ``here``; None for external links."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    base = here.split("/")[:-1]
    for piece in unquote(parts.path).split("/"):
        if piece == "..":
            if not base:
                return None
            base.pop()
        elif piece not in ("", "."):
            base.append(piece)
    return _short("/".join(base)) or None


# -- writing ---------------------------------------------------------------------------
def write_zim(path: str | os.PathLike[str], articles: dict[str, tuple[str, str, list[str]]],
              main: str | None = None) -> Path:
    """Write ``articles`` ``{page_id: (title, text, [linked page_id, ...])}`` as a ZIM with libzim's writer."""
    from libzim.writer import Creator, Hint, Item, StringProvider

    class _Article(Item):
        def __init__(self, page_id: str, title: str, body: str) -> None:
            super().__init__()
            self._id, self._title, self._body = page_id, title, body

        def get_path(self) -> str:
            return self._id

        def get_title(self) -> str:
            return self._title

        def get_mimetype(self) -> str:
            return "text/html"

        def get_contentprovider(self) -> StringProvider:
            return StringProvider(self._body)

        def get_hints(self) -> dict:
            return {Hint.FRONT_ARTICLE: True}

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with Creator(str(tmp)).config_verbose(False).config_indexing(False, "eng") as creator:
        creator.set_mainpath(main or next(iter(articles)))
        for key, value in (("Title", "GEM WikiGame corpus"), ("Language", "eng"), ("Creator", "gem-envs-games"),
                           ("Publisher", "gem-envs-games"), ("Description", "Linked articles for WikiGame"),
                           ("Date", "2025-01-01"), ("Name", "gem_wikigame")):
            creator.add_metadata(key, value)
        for page_id, (title, text, links) in articles.items():
            # relative hrefs, as kiwix dumps write them
            here = posixpath.dirname(page_id) or "."
            anchors = " ".join(f'<a href="{html.escape(posixpath.relpath(link, here))}">'
                               f"{html.escape(articles[link][0])}</a>" for link in links if link in articles)
            body = (f"<html><head><title>{html.escape(title)}</title></head><body>"
                    f"<p>{html.escape(text)}</p><p>See also: {anchors}</p></body></html>")
            creator.add_item(_Article(page_id, title, body))
    os.replace(tmp, path)
    return path


#: the tiny corpus: page id -> (one-line text, linked ids). Each page also links the next one (a ring), so every
#: page can reach every other and the shortest paths are short.
TINY: dict[str, tuple[str, list[str]]] = {
    "Physics": ("the natural science of matter, energy and their interactions.", ["Energy", "Mathematics", "Light"]),
    "Energy": ("the capacity to do work, conserved in every closed system.", ["Sun", "Electricity", "Physics"]),
    "Mathematics": ("the study of number, quantity, structure and change.", ["Algebra", "Geometry", "Computer"]),
    "Algebra": ("the branch of mathematics that manipulates symbols with rules.", ["Mathematics", "Equation"]),
    "Equation": ("a statement that two mathematical expressions are equal.", ["Algebra", "Physics"]),
    "Geometry": ("the mathematics of shape, size and the properties of space.", ["Pyramid", "Mathematics"]),
    "Pyramid": ("a structure with a polygonal base and triangular faces meeting at an apex.", ["Egypt", "Geometry"]),
    "Egypt": ("a country in North Africa along the river Nile.", ["Nile", "Pyramid", "Africa"]),
    "Nile": ("a major river of Africa that flows north into the Mediterranean Sea.", ["Egypt", "River"]),
    "River": ("a natural stream of water flowing toward an ocean, a lake or another river.", ["Nile", "Ocean"]),
    "Ocean": ("a body of salt water covering most of the Earth.", ["Whale", "River", "Earth"]),
    "Whale": ("a large marine mammal that breathes air through a blowhole.", ["Mammal", "Ocean"]),
    "Mammal": ("an animal that is warm-blooded and feeds its young with milk.", ["Whale", "Dog", "Cat"]),
    "Dog": ("a domesticated descendant of the wolf, kept as a companion.", ["Wolf", "Mammal"]),
    "Wolf": ("a large wild canine that lives and hunts in packs.", ["Dog", "Forest"]),
    "Forest": ("a large area covered chiefly with trees.", ["Tree", "Wolf"]),
    "Tree": ("a perennial plant with a woody trunk and branches.", ["Forest", "Photosynthesis"]),
    "Photosynthesis": ("the process by which plants turn light into chemical energy.", ["Light", "Tree", "Sun"]),
    "Light": ("electromagnetic radiation that the human eye can see.", ["Sun", "Physics", "Photosynthesis"]),
    "Sun": ("the star at the centre of the Solar System.", ["Earth", "Light", "Energy"]),
    "Earth": ("the third planet from the Sun and the only one known to host life.", ["Moon", "Sun", "Ocean"]),
    "Moon": ("Earth's only natural satellite.", ["Earth", "Tide"]),
    "Tide": ("the rise and fall of sea levels caused by the Moon and the Sun.", ["Moon", "Ocean"]),
    "Africa": ("the second-largest continent, home to over fifty countries.", ["Egypt", "Kenya"]),
    "Kenya": ("a country in East Africa known for its savannas.", ["Africa", "Lion"]),
    "Lion": ("a large cat of the savanna that lives in groups called prides.", ["Cat", "Kenya"]),
    "Cat": ("a small domesticated carnivorous mammal.", ["Mammal", "Lion"]),
    "Computer": ("a machine that carries out sequences of arithmetic or logical operations.",
                 ["Electricity", "Internet", "Mathematics"]),
    "Electricity": ("the set of phenomena associated with moving electric charge.", ["Computer", "Energy"]),
    "Internet": ("the global network of interconnected computer networks.", ["Computer", "Music"]),
    "Music": ("the art of arranging sound in time.", ["Piano", "Internet"]),
    "Piano": ("a keyboard instrument whose strings are struck by hammers.", ["Music", "Mozart"]),
    "Mozart": ("a prolific composer of the classical period, born in Salzburg.", ["Piano", "Austria"]),
    "Austria": ("a landlocked country in Central Europe.", ["Mozart", "Europe"]),
    "Europe": ("a continent in the Northern Hemisphere.", ["Austria", "Africa"]),
}


def tiny_articles() -> dict[str, tuple[str, str, list[str]]]:
    """The tiny corpus as :func:`write_zim` takes it."""
    ids = list(TINY)
    out = {}
    for i, page_id in enumerate(ids):
        text, links = TINY[page_id]
        ring = ids[(i + 1) % len(ids)]
        out[page_id] = (page_id, f"{page_id} is {text}", [*links, *([ring] if ring not in links else [])])
    return out


_TINY_VERSION = 2


def tiny_zim() -> Path:
    """The tiny corpus's ZIM, built into the data cache on first use (``$GEM_DATA_DIR``, else ~/.cache/gem/data)."""
    from gem.data.packaged import data_dir

    path = data_dir() / "wikigame" / f"tiny-v{_TINY_VERSION}.zim"
    if not path.is_file():
        # libzim's writer reports its progress on the process's stdout (C++, not sys.stdout): write in a child
        # process whose stdout goes nowhere, so `gem play` and friends show only the game
        code = ("import sys; from gem_envs_games.wikigame_zim import tiny_articles, write_zim; "
                "write_zim(sys.argv[1], tiny_articles(), main='Physics')")
        subprocess.run([sys.executable, "-c", code, str(path)], stdout=subprocess.DEVNULL, check=True)
    return path
