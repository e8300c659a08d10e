"""WikiGame offline: ZIM files built here with libzim's own writer, the reference's ids and
variants, the shortest-path solver, state, seeds, fuzzing, and the opt-in live backend
against a local stand-in of the MediaWiki API (the real one needs the network)."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem
from gem.testing import check_env
from gem_envs_games.wikigame import WikiGameEnv, WikiGameSolver, shortest_path
from gem_envs_games.wikigame_zim import ZimWiki, tiny_articles, write_zim

IDS = ["game:WikiGame-v0-easy", "game:WikiGame-v0-hard"]


@pytest.fixture(scope="module")
def zim(tmp_path_factory):
    """A few dozen linked articles, plus a dead end, in the old ``A/`` namespace layout of kiwix dumps."""
    articles = {f"A/{k}": (title, text, [f"A/{link}" for link in links]) for k, (title, text, links) in
                tiny_articles().items()}
    articles["A/Physics"][2].append("A/Dead_end")
    articles["A/Dead_end"] = ("Dead end", "A page that links nowhere.", [])
    return write_zim(tmp_path_factory.mktemp("zim") / "test.zim", articles, main="A/Physics")


def test_the_reference_ids_and_presets():
    assert set(IDS) <= set(gem.list_envs("game:WikiGame"))
    assert gem.make(IDS[0]).max_turns == 30 and gem.make(IDS[1]).max_turns == 15


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    check_env(gem.make(env_id))


@pytest.mark.parametrize("variant", ["oneback", "freenav", "eidetic"])
def test_check_env_variants(zim, variant):
    check_env(WikiGameEnv(max_turns=10, zim_path=zim, variant=variant), num_random_strings=50)


def test_reading_a_zim(zim):
    wiki = ZimWiki(zim)
    page = wiki.get_page("Physics")
    assert page.title == "Physics" and page.content.startswith("Physics is the natural science")
    assert page.links[:3] == ["Energy", "Mathematics", "Light"] and "Dead_end" in page.links
    assert wiki.get_page("A/Physics") == page and wiki.get_page("Nope") is None and wiki.get_page("") is None
    assert wiki.get_page("Dead_end").links == []


def test_relative_and_external_links_in_real_dump_html(tmp_path):
    # kiwix dumps link with relative paths; external links and missing articles are not neighbours
    from gem_envs_games.wikigame_zim import _article_path

    assert _article_path("A/Physics", "Energy") == "Energy"
    assert _article_path("A/Physics", "../A/Energy#History") == "Energy"
    assert _article_path("Physics", "./Light") == "Light"
    assert _article_path("A/Physics", "https://example.org/x") is None
    assert _article_path("Physics", "../../etc/passwd") is None


def test_the_solver_wins_every_seed_within_the_hard_limit():
    env = gem.make("game:WikiGame-v0-hard")
    for seed in range(30):
        obs, _ = env.reset(seed=seed)
        assert len(shortest_path(env)) <= env.max_turns
        solver = WikiGameSolver(env)
        solver.reset()
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(solver.act(obs))
            done = terminated or truncated
        assert reward == 1.0 and info["correct"], obs


def _at(env, seed, start, target):
    env.reset(seed=seed)
    env.start = env.current = start
    env.target, env.history, env.memory = target, [start], []


def test_moves_invalid_moves_format_errors_and_dead_ends(zim):
    env = WikiGameEnv(max_turns=5, zim_path=zim)
    _at(env, 0, "Physics", "Moon")
    obs, reward, terminated, *_ = env.step("\\boxed{Tide}")
    assert "not a neighbouring page" in obs and reward == 0.0 and not terminated
    obs, reward, terminated, *_ = env.step("\\boxed{ener}")
    assert "Did you mean 'Energy'?" in obs
    obs, reward, terminated, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert "not allowed" in obs
    obs, reward, terminated, *_ = env.step("I go to \\boxed{Dead end}")  # spaces stand for underscores
    assert "dead end" in obs and terminated and reward == 0.0
    env.reset(seed=0)
    obs, reward, terminated, _tr, info = env.step("Energy")
    assert (reward, terminated, info["correct"]) == (-0.1, True, False)


def test_backtracking_variants(zim):
    env = WikiGameEnv(max_turns=10, zim_path=zim, variant="oneback")
    _at(env, 0, "Physics", "Moon")
    obs, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert "no previous page" in obs
    env.step("\\boxed{Energy}")
    env.step("\\boxed{Sun}")
    obs, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert env.current == "Energy" and "went back" in obs
    obs, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert "twice in a row" in obs and env.current == "Energy"
    env.step("\\boxed{Physics}")
    obs, *_ = env.step("\\boxed{Dead_end}")  # a dead end sends you back, at the cost of a turn
    assert env.current == "Physics" and env.turn == 8 and "dead end" in obs
    free = WikiGameEnv(max_turns=10, zim_path=zim, variant="freenav")
    _at(free, 0, "Physics", "Moon")
    free.step("\\boxed{Energy}")
    free.step("\\boxed{Sun}")
    free.step("\\boxed{<PREV_PAGE>}")
    free.step("\\boxed{<PREV_PAGE>}")
    assert free.current == "Physics"
    eidetic = WikiGameEnv(max_turns=10, zim_path=zim, variant="eidetic")
    _at(eidetic, 0, "Physics", "Moon")
    eidetic.step("\\boxed{Energy}")
    obs, *_ = eidetic.step("\\boxed{Mathematics}")  # linked from Physics, seen before: allowed
    assert eidetic.current == "Mathematics"


def test_summary_units(zim):
    page = ZimWiki(zim).get_page("Physics")
    assert WikiGameEnv(zim_path=zim, page_summary_length=(3, "words")).summary(page) == "Physics is the"
    assert WikiGameEnv(zim_path=zim, page_summary_length=(1, "sentences")).summary(page).endswith("interactions.")
    with pytest.raises(ValueError, match="unit"):
        WikiGameEnv(zim_path=zim, page_summary_length=(3, "pages"))


def test_bad_settings_name_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="zim_path"):
        WikiGameEnv(zim_path=tmp_path / "missing.zim")
    with pytest.raises(ValueError, match="backend='zim'"):
        WikiGameEnv(backend="kiwix")
    with pytest.raises(ValueError, match="variant"):
        WikiGameEnv(variant="teleport")


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_replay_and_state_round_trip(env_id):
    env = gem.make(env_id)

    def play(seed):
        obs, _ = env.reset(seed=seed)
        return [obs, *(env.step(env.sample_random_action()) for _ in range(4))]

    assert play(5) == play(5) and play(5) != play(6)
    env.reset(seed=9)
    env.step(env.sample_random_action())
    state = json.loads(json.dumps(env.get_state()))
    rest = [env.step(env.sample_random_action()) for _ in range(3)]
    twin = gem.make(env_id)
    twin.set_state(state)
    assert [twin.step(twin.sample_random_action()) for _ in range(3)] == rest


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), actions=st.lists(st.one_of(
    st.text(max_size=30), st.text(max_size=30).map(lambda t: f"\\boxed{{{t}}}"),
    st.sampled_from(["\\boxed{<PREV_PAGE>}", "\\boxed{../Physics}", "\\boxed{A/Physics}", "\\boxed{Physics}"])),
    max_size=20))
def test_any_text_is_a_legal_action(seed, actions):
    env = gem.make("game:WikiGame-v0-hard")
    env.reset(seed=seed)
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        assert isinstance(obs, str) and math.isfinite(reward) and -0.1 <= reward <= 1.0
        if terminated or truncated:
            break


class _FakeMediaWiki(BaseHTTPRequestHandler):
    """Answers the two queries the live backend sends, from the tiny corpus."""

    randoms = iter(["Physics", "Moon"] * 1000)

    def do_GET(self):
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        articles = tiny_articles()
        if query.get("list") == "random":
            body = {"query": {"random": [{"title": next(self.randoms)}]}}
        else:
            key = query["titles"].replace(" ", "_")
            if key in articles:
                title, text, links = articles[key]
                body = {"query": {"pages": [{"title": title, "extract": text,
                                             "links": [{"title": link} for link in links]}]}}
            else:
                body = {"query": {"pages": [{"title": key, "missing": True}]}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_live_mediawiki_backend_is_opt_in():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMediaWiki)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/w/api.php"
        env = gem.make("game:WikiGame-v0-easy", backend="mw", trawler_kwargs={"url": url, "query_delay_ms": 0})
        env.reset(seed=0)
        assert (env.start, env.target) == ("Physics", "Moon")
        env.target = "Energy"
        obs, reward, terminated, *_ = env.step("\\boxed{Energy}")
        assert reward == 1.0 and terminated
    finally:
        server.shutdown()
        server.server_close()
