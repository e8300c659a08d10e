"""GRPO on a GEM env with TRL's GRPOTrainer, through GEM's multi-turn rollout_func
(or, with --hook tools, through environment_factory: the env as a tool).

    python examples/trl/train_grpo.py --env game:GuessTheNumber-v0-easy --max-steps 10

Without --model it builds gem-train's tiny Qwen2 (a tokenizer trained on the env's text,
random weights) and biases its generation towards the env's action format, so the run
shows multi-turn episodes on a CPU in about a minute. With --model (a local folder or a
hub id) any causal LM with a chat template trains; add --use-vllm on a GPU machine.
The trainer's log history goes to OUT/log_history.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# before anything imports huggingface_hub: no run waits on the hub unless the user asked (HF_HUB_OFFLINE=0)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import gem
from gem_integrations.trl import (
    GemRollout,
    action_bias,
    env_reward,
    gem_dataset,
    tool_call_text,
    tool_chat_template,
    tool_environment,
)

#: default completion budget per hook (tokens per episode, env text included): with tools, room for the
#: four calls and answers of a GuessTheNumber-v0-easy game
BUDGET = {"rollout": 64, "tools": 320}


def tool_texts(env_id: str, samples: int = 64) -> list[str]:
    """Tool calls playing the env's random moves and the tool's answers, as the tool template writes them."""
    env = gem.make(env_id)
    texts = []
    try:
        env.reset(seed=0)
        for _ in range(samples):
            action = env.sample_random_action()
            obs, _, terminated, truncated, _ = env.step(action)
            texts += [tool_call_text(action), f"<tool_response>\n{obs}\n</tool_response>"]
            if terminated or truncated:
                env.reset()
    finally:
        env.close()
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v0-easy", help="any registered GEM env id")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--model", default=None, help="a causal LM (default: build gem-train's tiny model)")
    parser.add_argument("--hook", choices=["rollout", "tools"], default="rollout")
    parser.add_argument("--num-generations", type=int, default=4, help="rollouts per GRPO group (one seed)")
    parser.add_argument("--groups", type=int, default=1, help="GRPO groups per step")
    parser.add_argument("--max-completion-length", type=int, default=None,
                        help=f"tokens per episode, env text included (default {BUDGET['rollout']}; "
                             f"{BUDGET['tools']} with --hook tools)")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM (colocated; GPU)")
    parser.add_argument("--out", default="runs/trl-example")
    args = parser.parse_args()
    out = Path(args.out)
    args.max_completion_length = args.max_completion_length or BUDGET[args.hook]

    tiny = args.model is None
    if tiny:
        from gem_train.model import build_tiny_model

        # with --hook tools the tokenizer also learns the tool-call markup: spelled out byte by byte, one call
        # and the tool's answer fill most of the budget, and a game needs several moves. One folder per hook,
        # since build_tiny_model's reuse check does not look at extra_texts.
        extra = tool_texts(args.env) if args.hook == "tools" else None
        args.model = str(build_tiny_model(out / f"tiny-model-{args.hook}", lambda: gem.make(args.env),
                                          extra_texts=extra))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if args.hook == "tools":
        tokenizer.chat_template = tool_chat_template("qwen3")  # a template TRL can parse tool calls with
    # the untrained tiny model is steered to the env's action format (as a tool call with --hook tools)
    wrap = tool_call_text if args.hook == "tools" else None
    generation_kwargs = {"sequence_bias": action_bias(args.env, tokenizer, wrap=wrap)} if tiny else None

    config = GRPOConfig(
        output_dir=str(out), max_steps=args.max_steps, learning_rate=args.learning_rate,
        per_device_train_batch_size=args.num_generations * args.groups, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, beta=0.0, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=not args.use_vllm, use_vllm=args.use_vllm, vllm_mode="colocate", seed=0,
        generation_kwargs=generation_kwargs, max_tool_calling_iterations=8,
        # a tiny model needs no activation checkpointing; it only slows the CPU down
        gradient_checkpointing=not tiny,
    )
    seeds = range(args.max_steps * args.groups)
    if args.hook == "rollout":
        trainer = GRPOTrainer(model=args.model, reward_funcs=env_reward, args=config, processing_class=tokenizer,
                              train_dataset=gem_dataset(args.env, seeds), rollout_func=GemRollout(args.env))
        reward_key = "rewards/env_reward/mean"
    else:
        trainer = GRPOTrainer(model=args.model, args=config, processing_class=tokenizer,
                              train_dataset=gem_dataset(args.env, seeds, for_tools=True),
                              environment_factory=tool_environment(args.env))
        reward_key = "rewards/GemToolEnv/mean"
    trainer.train()

    history = trainer.state.log_history
    (out / "log_history.json").write_text(json.dumps(history, indent=1))
    for entry in history:
        if reward_key in entry:
            print(f"step {entry['step']:3d}  env reward {entry[reward_key]:+.3f}  "
                  f"model tokens/episode {entry['completions/mean_length']:.1f}")
    print(f"log history: {out / 'log_history.json'}")


if __name__ == "__main__":
    main()
