"""GRPO on a GEM env with the Tinker cookbook's RL loop (tinker_cookbook.rl.train).

    TINKER_API_KEY=... python examples/tinker/train_gem.py --env game:GuessTheNumber-v0-easy

Sampling and training run on Tinker's hosted service; the cookbook runs the episodes
here, through GEM's ``GemDatasetBuilder`` (gem_integrations.tinker). ``--local-rollout``
needs no service: it plays one group with a stand-in policy that answers the env's random
moves (sample_random_action) through the cookbook's own ``do_group_rollout`` and prints
the trajectories' rewards and the tokens the cookbook would train on. Its tokenizer:
--tokenizer, else --model's from the Hugging Face hub when HF_HUB_OFFLINE=0, else gem-train's
tiny tokenizer trained here on the env's text. The hub is off unless HF_HUB_OFFLINE=0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

# before anything imports huggingface_hub: a run never waits on the hub unless the user asked for it
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gem
from gem_integrations.tinker import GemDatasetBuilder


class RandomMoves:
    """A TokenCompleter that plays the env's random moves (the policy interface the cookbook samples with)."""

    def __init__(self, env_id: str, tokenizer, stop):
        self.env, self.tokenizer, self.stop = gem.make(env_id), tokenizer, stop
        self.env.reset(seed=0)

    async def __call__(self, model_input, stop, *, max_tokens=None):
        from tinker_cookbook.completers import TokensWithLogprobs

        tokens = self.tokenizer.encode(self.env.sample_random_action(), add_special_tokens=False)
        stop_ids = [t for t in stop if isinstance(t, int)][:1]
        tokens += stop_ids or self.tokenizer.encode(stop[0], add_special_tokens=False)
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[0.0] * len(tokens))


async def local_rollout(builder: GemDatasetBuilder) -> None:
    from tinker_cookbook.rl.data_processing import trajectory_to_data
    from tinker_cookbook.rl.rollouts import do_group_rollout
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    train, _ = await builder()
    group_builder = train.get_batch(0)[0]
    tokenizer = get_tokenizer(builder.model_name_for_tokenizer)
    policy = RandomMoves(builder.env_id, tokenizer, stop=[tokenizer.eos_token_id])
    group = await do_group_rollout(group_builder, policy)
    for i, traj in enumerate(group.trajectories_G):
        (datum,) = trajectory_to_data(traj, traj_advantage=1.0)
        mask = datum.loss_fn_inputs["mask"].tolist()
        print(f"episode {i}: rewards {[t.reward for t in traj.transitions]}, "
              f"{int(sum(mask))} sampled tokens trained of {len(mask)}")


def hub_enabled() -> bool:
    """Whether the user turned the hub on (HF_HUB_OFFLINE read the way huggingface_hub reads it)."""
    return os.environ["HF_HUB_OFFLINE"].strip().upper() not in {"1", "ON", "YES", "TRUE"}


def tiny_tokenizer(env_id: str, out: Path) -> str | None:
    """gem-train's ChatML tokenizer trained on the env's text, saved under ``out`` (None without gem-train)."""
    try:
        from gem_train.model import env_corpus
        from gem_train.tokenizer import train_chat_tokenizer
    except ImportError:
        return None
    if not (out / "tokenizer.json").exists():
        train_chat_tokenizer(env_corpus(lambda: gem.make(env_id), episodes=20), vocab_size=400).save_pretrained(out)
    return str(out)


def choose_tokenizer(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """--tokenizer, else --model's from the hub when it is on, else (local rollout) gem-train's tiny one; or
    a one-line error, at once, instead of a hub lookup that can only fail."""
    if args.tokenizer or hub_enabled():
        return args.tokenizer or args.model
    if args.local_rollout:
        local = tiny_tokenizer(args.env, Path(args.out) / "tiny-tokenizer")
        if local:
            return local
        parser.error("--local-rollout needs a tokenizer: pass --tokenizer PATH, install gem-train for its tiny "
                     f"local one (pip install -e gem-train), or set HF_HUB_OFFLINE=0 to download {args.model}'s")
    parser.error(f"training loads {args.model}'s tokenizer from the Hugging Face hub, which is off by default: "
                 "set HF_HUB_OFFLINE=0 (or pass --tokenizer PATH)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    parser.add_argument("--model", default="Qwen/Qwen3-4B-Instruct-2507", help="a model Tinker serves")
    parser.add_argument("--renderer", default="qwen3_instruct")
    parser.add_argument("--tokenizer", default=None, help="tokenizer name or folder (default: see above)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="runs/tinker-example")
    parser.add_argument("--local-rollout", action="store_true", help="one group, stand-in policy, no service")
    args = parser.parse_args()
    builder = GemDatasetBuilder(env_id=args.env, renderer_name=args.renderer,
                                model_name_for_tokenizer=choose_tokenizer(args, parser),
                                batch_size=args.batch_size, group_size=args.group_size, n_batches=args.steps)
    if args.local_rollout:
        asyncio.run(local_rollout(builder))
        return
    from tinker_cookbook.rl import train

    config = train.Config(recipe_name="gem", model_name=args.model, renderer_name=args.renderer,
                          dataset_builder=builder, learning_rate=4e-5, max_tokens=256, log_path=args.out)
    asyncio.run(train.main(config))


if __name__ == "__main__":
    main()
