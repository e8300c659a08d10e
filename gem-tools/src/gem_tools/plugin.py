"""gem-tools' plugin: registers the tools and GEM's tool-wrapper names.

Import-light: the factories import the tool modules only when called.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from gem.hookspecs import hookimpl

#: GEM's tool-wrapper presets: (tool, wrapper kwargs, tool kwargs). The reference's constants;
#: with the wrapper's default crediting an episode earns at most one call's worth of them
WRAPPER_PRESETS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "python_tool": ("python", {"tool_reward": 0.05, "tool_success_reward": 0.25, "max_tool_uses": 5}, {}),
    "python_tool_no_int_reward": ("python", {"tool_reward": 0.0, "tool_success_reward": 0.0, "max_tool_uses": 5}, {}),
    "python_tool_no_int_reward_last_line_error": (
        "python",
        {"tool_reward": 0.0, "tool_success_reward": 0.0, "max_tool_uses": 5},
        {"keep_error_last_line": True},
    ),
    "search_tool": ("search", {"tool_reward": 0.3, "tool_success_reward": 0.0, "max_tool_uses": 5}, {}),
    "search_tool_no_int_reward": ("search", {"tool_reward": 0.0, "tool_success_reward": 0.0, "max_tool_uses": 5}, {}),
}


def make_python_tool(**kwargs: Any):
    """``PythonCodeTool(timeout=5, **kwargs)`` (GEM's preset timeout)."""
    from gem_tools.python_tool import PythonCodeTool

    return PythonCodeTool(**{"timeout": 5, **kwargs})


@functools.lru_cache(maxsize=8)
def _shared_search_tool(url: str | None, corpus: str | None, topk: int):
    from gem_tools.search import SearchTool

    return SearchTool(search_url=url, corpus=corpus, topk=topk, timeout=5)


def make_search_tool(topk: int = 3, **kwargs: Any):
    """A search tool from ``SEARCH_URL`` (a GEM retrieval server) or ``GEM_SEARCH_CORPUS``
    (a local JSONL corpus indexed with BM25); built once per process and shared."""
    if kwargs:
        from gem_tools.search import SearchTool

        return SearchTool(topk=topk, **kwargs)
    return _shared_search_tool(os.environ.get("SEARCH_URL"), os.environ.get("GEM_SEARCH_CORPUS"), topk)


def make_mcp_tool(*args: Any, **kwargs: Any):
    """``MCPTool(...)``: see :class:`gem_tools.mcp_tool.MCPTool`."""
    from gem_tools.mcp_tool import MCPTool

    return MCPTool(*args, **kwargs)


TOOL_FACTORIES = {"python": make_python_tool, "search": make_search_tool, "mcp": make_mcp_tool}


def make_tool_wrapper(env: Any, preset: str, **overrides: Any) -> Any:
    """Wrap ``env`` with the tool wrapper of GEM's preset ``preset``; ``overrides`` replace
    its :class:`~gem_tools.wrapper.ToolEnvWrapper` arguments.

    >>> (wrap,) = get_wrapper_fns("python_tool")                      # doctest: +SKIP
    >>> env = wrap(env, max_tool_reward_per_episode=0.6, max_tool_uses=3)  # doctest: +SKIP
    """
    from gem_tools.wrapper import ToolEnvWrapper

    tool_name, wrapper_kwargs, tool_kwargs = WRAPPER_PRESETS[preset]
    tool = TOOL_FACTORIES[tool_name](**tool_kwargs)
    return ToolEnvWrapper(env, tools=[tool], **{**wrapper_kwargs, **overrides})


@hookimpl
def gem_register_tools(registry: Any) -> None:
    for name, factory in TOOL_FACTORIES.items():
        registry.register(name, factory)


@hookimpl
def gem_register_wrappers(registry: Any) -> None:
    for preset in WRAPPER_PRESETS:
        registry.register(preset, functools.partial(make_tool_wrapper, preset=preset))


def cmd_search_server(argv: list[str]) -> int:
    from gem_tools.search.server import main

    return main(argv)


def cmd_sandbox(argv: list[str]) -> int:
    """Say which sandbox backends work here and how whole runs are capped; exit 1 when
    no isolating backend works."""
    import argparse

    argparse.ArgumentParser(prog="gem sandbox", description=cmd_sandbox.__doc__).parse_args(argv)
    from gem_tools.sandbox import Sandbox, available_backends, cgroups, resolve_backend

    for name, why in available_backends().items():
        print(f"{name:<8} {'ok' if why is None else 'unavailable: ' + why}")
    where = cgroups.support()
    print(f"run limits: {where.mode}: {where.detail}")
    print("fallback: without a cgroup only per-process rlimits apply (RLIMIT_AS per process, RLIMIT_NPROC per run "
          "uid); cgroup v2 is used where memory and pids are delegated, else v1 where writable")  # fmt: skip
    try:
        print(f"default: {resolve_backend('auto').name}")
    except RuntimeError as exc:
        print(exc)
        return 1
    box = Sandbox()
    box.run_python("pass")  # a zygote that cannot start shows up as the reason for the cold path
    path, why = box.path()
    print(f"python runs: {path} ({why}); commands: cold (a fresh sandbox each)")
    for line in _sandboxed_elsewhere():
        print(line)
    return 0


#: entry-point group through which other packages say what of theirs runs in the sandbox:
#: each names a callable that returns ``(what, where, why)`` triples (e.g. gem-envs-math's
#: grading workers), for ``gem sandbox`` to show
SANDBOXED_GROUP = "gem_tools.sandboxed"


def _sandboxed_elsewhere() -> list[str]:
    from importlib.metadata import entry_points

    lines = []
    for entry in sorted(entry_points(group=SANDBOXED_GROUP), key=lambda e: e.name):
        try:
            triples = entry.load()()
        except Exception as exc:  # one package's report must not hide the others'
            lines.append(f"{entry.name}: cannot say ({type(exc).__name__}: {exc})")
            continue
        lines += [f"{what}: {where} ({why})" for what, where, why in triples]
    return lines


@hookimpl
def gem_register_commands(cli: Any) -> None:
    cli.register("search-server", cmd_search_server, help="serve a JSONL corpus (BM25) with GEM's retrieval protocol")
    cli.register("sandbox", cmd_sandbox, help="show which sandbox backends work on this machine")


@hookimpl
def gem_register_compat(registry: Any) -> None:
    # the reference package's module paths of the tools (gem.compat)
    registry.register("gem.tools.base_tool", {"BaseTool": "gem_tools.base:ReferenceTool"})
    registry.register("gem.tools.python_code_tool", {"PythonCodeTool": "gem_tools.python_tool:PythonCodeTool"})
    registry.register("gem.tools.search_tool", {"SearchTool": "gem_tools.search:SearchTool"})
    registry.register("gem.tools.mcp_tool", {"MCPTool": "gem_tools.mcp_tool:MCPTool"}, needs={"mcp": "gem-tools[mcp]"})
    registry.register("gem.tools.tool_env_wrapper", {"ToolEnvWrapper": "gem_tools.wrapper:ToolEnvWrapper"})
    registry.register("gem.tools.mcp_server.time_mcp", "gem_tools.mcp_servers.time_server",
                      needs={"mcp": "gem-tools[mcp]"})
    registry.register("gem.utils.sandbox", {"run_python": "gem_tools.reference_api:run_python"})


@hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this package provides (gem.provides)
    registry.command("search-server")
    registry.command("sandbox")
    registry.reference_path("gem.tools")
    registry.reference_path("gem.utils.sandbox")
