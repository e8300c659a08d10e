"""The learner: turns with advantages in, one policy update out.

Orchestration only; the maths is in :mod:`gem_train.algorithms`. Gradients accumulate
over micro-batches, and the loss of every micro-batch is divided by the normaliser of
the whole optimiser step, so micro-batching changes memory, not the update.

>>> learner = Learner(model, algo_cfg, trainer_cfg, temperature=1.0, norm_constant=32)   # doctest: +SKIP
>>> metrics = learner.update(samples, advantages)                                        # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from gem_train.algorithms.losses import entropy, loss_normaliser, policy_loss_sum, token_logprobs
from gem_train.config import AlgoConfig, TrainerConfig
from gem_train.rollout import TurnSample


def pack(samples: Sequence[TurnSample], pad_id: int, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded prompt+response sequences and the layout of their response tokens.

    Returns ``input_ids``/``attention_mask`` (B, L) and, for the L-1 next-token
    positions, ``targets``, ``mask`` (1 where the target is a response token) and the
    sampler's ``old_logprobs`` (B, L-1).
    """
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(samples), width), dtype=torch.long)
    mask = torch.zeros((len(samples), width - 1))
    old = torch.zeros((len(samples), width - 1))
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        ids[i, :p + r] = torch.tensor(s.prompt_ids + s.response_ids)
        attn[i, :p + r] = 1
        # position t predicts token t+1: response token j sits at p+j, predicted from p+j-1
        mask[i, p - 1:p - 1 + r] = 1
        if s.logprobs:
            old[i, p - 1:p - 1 + r] = torch.tensor(s.logprobs)
    return {
        "input_ids": ids.to(device),
        "attention_mask": attn.to(device),
        "targets": ids[:, 1:].to(device),
        "mask": mask.to(device),
        "old_logprobs": old.to(device),
    }


class Learner:
    """Holds the trained model and its AdamW optimiser."""

    def __init__(
        self,
        model: Any,
        algo: AlgoConfig,
        trainer: TrainerConfig,
        temperature: float,
        norm_constant: float,
        pad_id: int,
        lr: float | None = None,
        seed: int = 0,
    ) -> None:
        self.model, self.algo, self.trainer = model, algo, trainer
        self.temperature, self.norm_constant, self.pad_id = temperature, norm_constant, pad_id
        self.device = next(model.parameters()).device
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=lr if lr is not None else trainer.lr, weight_decay=trainer.weight_decay,
            betas=(trainer.adam_betas[0], trainer.adam_betas[1]),
        )
        self.generator = torch.Generator().manual_seed(seed)

    def _forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Learner logprobs of the targets (B, L-1) and the entropy at each position (B, L-1)."""
        logits = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
        return token_logprobs(logits, batch["targets"], self.temperature), entropy(logits.detach(), self.temperature)

    def _minibatches(self, n: int) -> list[list[int]]:
        order = torch.randperm(n, generator=self.generator).tolist()
        size = math.ceil(n / self.trainer.minibatches)
        return [order[i:i + size] for i in range(0, n, size)]

    def _step(self) -> float:
        clip = self.trainer.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip if clip is not None else float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def update(self, samples: Sequence[TurnSample], advantages: Sequence[float], seed: int | None = None
               ) -> dict[str, float]:
        """``algo.epochs`` passes of policy-gradient steps over the turns that have a response.

        ``seed`` reseeds the minibatch shuffle, so an update depends on its iteration only and a
        resumed run repeats an uninterrupted one.
        """
        if seed is not None:
            self.generator.manual_seed(seed)
        keep = [i for i, s in enumerate(samples) if s.response_ids]
        samples = [samples[i] for i in keep]
        adv_all = torch.tensor([float(advantages[i]) for i in keep])
        if not samples:
            return {}
        self.model.train()
        totals: dict[str, float] = {}
        tokens_seen, steps = 0.0, 0
        for _ in range(self.algo.epochs):
            for mb in self._minibatches(len(samples)):
                num_tokens = sum(len(samples[i].response_ids) for i in mb)
                norm = loss_normaliser(self.algo.loss_norm, len(mb), num_tokens, self.norm_constant)
                for start in range(0, len(mb), self.trainer.micro_batch_size):
                    idx = mb[start:start + self.trainer.micro_batch_size]
                    batch = pack([samples[i] for i in idx], self.pad_id, self.device)
                    logprobs, ent = self._forward(batch)
                    loss_sum, stats = policy_loss_sum(
                        logprobs, batch["old_logprobs"], adv_all[idx].to(self.device), batch["mask"],
                        self.algo.loss, self.algo.clip_eps, self.algo.tis_cap,
                    )
                    (loss_sum / norm).backward()
                    n = float(batch["mask"].sum())
                    stats["entropy"] = float((ent * batch["mask"]).sum()) / max(n, 1.0)
                    for key, value in stats.items():
                        totals[key] = totals.get(key, 0.0) + value * n
                    totals["loss"] = totals.get("loss", 0.0) + float(loss_sum.detach()) / norm
                    tokens_seen += n
                totals["grad_norm"] = totals.get("grad_norm", 0.0) + self._step()
                steps += 1
        metrics = {k: v / max(tokens_seen, 1.0) for k, v in totals.items() if k not in ("loss", "grad_norm")}
        metrics["loss"] = totals["loss"] / steps
        metrics["grad_norm"] = totals["grad_norm"] / steps
        metrics["optimizer_steps"] = float(steps)
        return metrics

    def supervised_update(self, samples: Sequence[TurnSample]) -> dict[str, float]:
        """One optimiser step of token-mean negative log-likelihood on the responses (the SFT stage)."""
        self.model.train()
        num_tokens = sum(len(s.response_ids) for s in samples)
        total = 0.0
        for start in range(0, len(samples), self.trainer.micro_batch_size):
            batch = pack(samples[start:start + self.trainer.micro_batch_size], self.pad_id, self.device)
            logprobs, _ = self._forward(batch)
            loss = -(logprobs * batch["mask"]).sum() / max(num_tokens, 1)
            loss.backward()
            total += float(loss.detach())
        return {"sft_loss": total, "grad_norm": self._step()}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The model's weights, detached, for the engine."""
        return {k: v.detach() for k, v in self.model.state_dict().items()}
