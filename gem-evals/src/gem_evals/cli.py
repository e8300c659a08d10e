"""``gem eval ENV_IDS --model MODEL [options]``: score a model on envs, resumably.

    gem eval game:GuessTheNumber-v0-easy --model http://127.0.0.1:8000/v1 --episodes 50
    gem eval math:GSM8K,eval:MATH500 --model openai:gpt-4o-mini --base-url https://api.openai.com/v1 \\
        --samples 4 --temperature 0.7 --concurrency 32
    gem eval game:Sudoku-v0-easy --model vllm:runs/demo/model --episodes 100
"""

from __future__ import annotations

import argparse
import json
import sys

from gem.registration import register
from gem_evals.evaluation import EvalConfig, EvalResult, evaluate
from gem_evals.metrics import markdown_table
from gem_evals.models import DEFAULT_REQUEST_TIMEOUT
from gem_evals.openai_client import HANG_STOP


class _DefaultsFormatter(argparse.HelpFormatter):
    """Shows an option's default once: only when it says something (not None, a flag's
    False, an empty list) and the help does not state the default itself."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        empty = default is None or default is False or (isinstance(default, (list, dict)) and not default)
        if "default" in text or empty or default is argparse.SUPPRESS:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gem eval",
        description="Evaluate a model on GEM envs: episodes run concurrently, every finished episode is one JSONL "
        "line, and running the same command again resumes an interrupted evaluation.",
        formatter_class=_DefaultsFormatter,
    )
    p.add_argument("env_ids", nargs="+", metavar="ENV_IDS", help="env ids, separated by spaces or commas")
    m = p.add_argument_group("model")
    m.add_argument("--model", required=True,
                   help="openai:NAME (an OpenAI-compatible endpoint, see --base-url), http(s)://HOST/v1 (an "
                   "endpoint; the model is the first it lists), vllm:PATH or hf:PATH (a local model folder, "
                   "run by gem-train's engines)")
    m.add_argument("--base-url", help="endpoint of openai: models (default: $OPENAI_BASE_URL, else OpenAI's API)")
    m.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable that holds the API key")
    m.add_argument("--max-model-len", type=int, default=4096, help="context length of vllm:/hf: engines")
    e = p.add_argument_group("episodes")
    e.add_argument("--episodes", type=int, default=10, help="episodes per env (episode i resets with seed SEED+i)")
    e.add_argument("--samples", type=int, default=1, help="rollouts per episode, for avg@k and pass@k")
    e.add_argument("--seed", type=int, default=0, help="first reset seed; also seeds sampling requests")
    e.add_argument("--max-turns", type=int, help="truncate episodes after this many turns")
    e.add_argument("--wrappers", help="wrapper names applied in order, e.g. python_tool; the chat history wrapper "
                   "`messages` is added unless a history mode (concat, concat_with_action, ...) is named")
    e.add_argument("--env-kwargs", type=json.loads, default={}, metavar="JSON",
                   help='keyword arguments for every env, e.g. \'{"max_turns": 5}\'')
    e.add_argument("--register", action="append", default=[], metavar="ID=MODULE:CLASS",
                   help="register an env of your own before the run (repeatable)")
    s = p.add_argument_group("sampling")
    s.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature; 0 is greedy (one answer per prompt); pass@k needs > 0")
    s.add_argument("--top-p", type=float, default=1.0,
                   help="nucleus sampling: sample from the smallest set of tokens whose probability reaches P")
    s.add_argument("--max-tokens", type=int, default=512, help="tokens per answer")
    sp = s.add_mutually_exclusive_group()
    sp.add_argument("--system-prompt", help="system message put before every conversation")
    sp.add_argument("--system-prompt-file", help="read the system message from this file")
    r = p.add_argument_group("running")
    r.add_argument("--concurrency", type=int, default=16, help="episodes in flight at once")
    r.add_argument("--step-timeout", type=float, metavar="SECONDS",
                   help="an env reset or step that takes longer ends its episode (a failure, error_kind timeout)")
    r.add_argument("--episode-timeout", type=float, metavar="SECONDS",
                   help="an episode that takes longer, model time included, ends as a failure")
    r.add_argument("--max-retries", type=int, default=5, help="retries of a failed request (connection, 429, 5xx)")
    r.add_argument("--retry-backoff", type=float, default=0.5, help="first retry delay in seconds; doubles each time")
    r.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT,
                   help=f"seconds without an answer before a request is retried (default {DEFAULT_REQUEST_TIMEOUT:g}); "
                        f"a server that answers none of {HANG_STOP} tries of a request stops the run")
    r.add_argument("--output", help="folder for episodes.jsonl, summary.md, summary.json (default gem-eval/MODEL)")
    r.add_argument("--overwrite", action="store_true", help="discard what --output holds instead of resuming")
    r.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def main(argv: list[str]) -> int:
    """Entry point of ``gem eval``; returns the exit status: 0, 1 when every episode run ended in an
    error, 130 when interrupted (a run stopped early raises :class:`~gem.errors.GemError`)."""
    args = build_parser().parse_args(argv)
    if args.register:
        for item in args.register:
            env_id, sep, entry_point = item.partition("=")
            if not sep or ":" not in entry_point:
                raise SystemExit(f"gem eval: --register wants ID=MODULE:CLASS, got {item!r}")
            register(env_id, entry_point)
    system_prompt = args.system_prompt
    if args.system_prompt_file:
        with open(args.system_prompt_file, encoding="utf-8") as f:
            system_prompt = f.read()
    if args.samples > 1 and args.temperature == 0.0:
        print("gem eval: --samples > 1 at temperature 0 repeats the same answer; pass@k needs --temperature > 0",
              file=sys.stderr)
    config = EvalConfig(
        env_ids=[e for ids in args.env_ids for e in ids.split(",") if e],
        model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
        episodes=args.episodes, samples=args.samples, seed=args.seed,
        temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, system_prompt=system_prompt,
        wrappers=args.wrappers, max_turns=args.max_turns, env_kwargs=args.env_kwargs,
        concurrency=args.concurrency, step_timeout=args.step_timeout, episode_timeout=args.episode_timeout,
        output=args.output, overwrite=args.overwrite,
        max_retries=args.max_retries, retry_backoff=args.retry_backoff, request_timeout=args.request_timeout,
        max_model_len=args.max_model_len, progress=not args.no_progress,
    )
    try:
        result = evaluate(config)
    except KeyboardInterrupt:
        print(f"\ngem eval: interrupted; finished episodes are in {config.output_dir() / 'episodes.jsonl'}. "
              "Run the same command again to resume.", file=sys.stderr)
        return 130
    print(markdown_table(result.summaries))
    rate = result.ran / result.seconds if result.seconds > 0 else 0.0
    print(f"\n{result.ran} episodes run, {result.resumed} resumed, {result.seconds:.1f} s ({rate:.1f} episodes/s). "
          f"Wrote {result.output}/episodes.jsonl, summary.md, summary.json")
    return _report_errors(result)


def _report_errors(result: EvalResult) -> int:
    """Say on stderr how many episodes ended in an error; 1 when every one did, other than by a timeout
    (the table then scores the setup, not the model)."""
    failed = sum(result.errors.values())
    if not failed:
        return 0
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(result.errors.items()))
    print(f"gem eval: {failed} of {result.ran} episodes ended in an error ({kinds}) and count as failures; "
          f"the first: {result.first_error}. episodes.jsonl has each one's error.", file=sys.stderr)
    if failed - result.errors.get("timeout", 0) == result.ran:
        print("gem eval: no episode ran without an error: the scores above do not measure the model",
              file=sys.stderr)
        return 1
    return 0
