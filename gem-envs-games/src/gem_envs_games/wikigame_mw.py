"""WikiGame's opt-in live backend: pages from a MediaWiki API (``backend="mw"``; never a default).

It needs the network, its random pages come from the server (so seeds do not replay
episodes) and it is slow and rate-limited: use a ZIM file for training and evaluation.
``url`` is the API endpoint; ``query_delay_ms`` spaces requests out (be kind to Wikimedia).
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

from gem_envs_games.wikigame_zim import MAX_LINKS, MAX_TEXT, WikiPage


class MediaWikiSource:
    """Pages by title from ``url`` (page ids are titles with underscores)."""

    def __init__(self, url: str = "https://en.wikipedia.org/w/api.php", query_delay_ms: int = 25,
                 query_use_cache: bool = True, timeout: float = 10.0, **_: Any) -> None:
        self.url, self.delay, self.timeout = url, query_delay_ms / 1000, timeout
        self.use_cache = query_use_cache
        self._cache: dict[str, WikiPage | None] = {}
        self._lock = threading.Lock()
        self._last = 0.0

    def _query(self, **params: Any) -> dict[str, Any]:
        with self._lock:
            wait = self._last + self.delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last = time.monotonic()
        query = urllib.parse.urlencode({"action": "query", "format": "json", "formatversion": 2, **params})
        request = urllib.request.Request(f"{self.url}?{query}", headers={"User-Agent": "gem-wikigame/0.1"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.loads(response.read(8 << 20))

    def get_page(self, page_id: str) -> WikiPage | None:
        if self.use_cache and page_id in self._cache:
            return self._cache[page_id]
        data = self._query(titles=page_id.replace("_", " "), prop="extracts|links|pageprops", explaintext=1,
                           plnamespace=0, pllimit="max", redirects=1)
        pages = data.get("query", {}).get("pages", [])
        page = None
        if pages and "missing" not in pages[0] and "disambiguation" not in pages[0].get("pageprops", {}):
            info = pages[0]
            links = [link["title"].replace(" ", "_") for link in info.get("links", [])][:MAX_LINKS]
            page = WikiPage(info["title"].replace(" ", "_"), info["title"], info.get("extract", "")[:MAX_TEXT], links)
        if self.use_cache:
            self._cache[page_id] = page
        return page

    def random_page(self, rng: random.Random, tries: int = 10) -> WikiPage | None:
        """A random article with links (the server chooses it: ``rng`` is not used)."""
        for _ in range(tries):
            found = self._query(list="random", rnnamespace=0, rnlimit=1).get("query", {}).get("random", [])
            page = self.get_page(found[0]["title"].replace(" ", "_")) if found else None
            if page is not None and page.links:
                return page
        return None
