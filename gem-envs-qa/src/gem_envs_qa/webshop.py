"""The reference's ``webshop:*`` ids, which need what GEM cannot ship.

WebShop (Yao et al., 2022) is a simulated web store: a product catalogue of about a
million items scraped from Amazon, its search engine (a Lucene/pyserini index) and the
store's web pages. None of it is on a package registry, so these ids are registered for
compatibility and ``make`` explains what they need instead of failing with an import error.
"""

from __future__ import annotations

from typing import Any

from gem.errors import DataUnavailableError

MESSAGE = (
    "webshop:* needs the WebShop store, which is not available here: its product data (items_shuffle.json, "
    "items_ins_v2.json, items_human_ins.json) and search index are downloaded by WebShop's own setup "
    "(github.com/princeton-nlp/WebShop, ./setup.sh -d all), and GEM has no offline copy or implementation of the "
    "store. Run the reference package's WebShop env against such a setup, or pick an offline multi-turn env "
    "(`gem list terminal:`, `gem list game:`)."
)


class WebShopEnv:
    """Registered for the reference's ids; raises :class:`~gem.errors.DataUnavailableError` when made."""

    def __init__(self, **_: Any) -> None:
        raise DataUnavailableError(MESSAGE)
