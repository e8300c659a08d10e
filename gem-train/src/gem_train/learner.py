"""The learner: turns with advantages in, one policy update out.

Orchestration only; the maths is in :mod:`gem_train.algorithms`. Gradients accumulate
over micro-batches, and the loss of every micro-batch is divided by the normaliser of
the whole optimiser step, so micro-batching changes memory, not the update.

Under ``torchrun`` each rank passes its share of the batch and the update equals the
single-process update on all ranks' turns in rank order: the minibatches are drawn from
the global indices, the normaliser counts the global minibatch, and DDP sums the ranks'
gradients (see :meth:`Learner.update`).

>>> learner = Learner(model, algo_cfg, trainer_cfg, temperature=1.0, norm_constant=32)   # doctest: +SKIP
>>> metrics = learner.update(samples, advantages)                                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from gem_train import distributed
from gem_train.algorithms.losses import loss_normaliser, policy_loss_sum
from gem_train.algorithms.ppo import value_loss_sum
from gem_train.config import AlgoConfig, TrainerConfig
from gem_train.critic import ActorCritic, Critic
from gem_train.model import DTYPES, tied_names
from gem_train.rollout import TurnSample


def pack(samples: Sequence[TurnSample], pad_id: int, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded prompt+response sequences and the layout of their response tokens.

    Returns ``input_ids``/``attention_mask`` (B, L); for the L-1 next-token positions,
    ``targets``, ``mask`` (1 where the target is a response token) and the sampler's
    ``old_logprobs`` (B, L-1); and ``value_index`` (B,), the position of each prompt's last
    token, where the critic reads the turn's state.
    """
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(samples), width), dtype=torch.long)
    mask = torch.zeros((len(samples), width - 1))
    old = torch.zeros((len(samples), width - 1))
    value_index = torch.zeros(len(samples), dtype=torch.long)
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        value_index[i] = p - 1
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
        "value_index": value_index.to(device),
    }


def _token_chunks(items: list[int], lengths: list[int], size: int, budget: int) -> list[list[int]]:
    """``items`` packed longest first into chunks of at most ``size`` items whose padded size (items x the
    longest) stays within ``budget`` tokens; a single item longer than the budget is a chunk of its own.

    >>> _token_chunks([0, 1, 2, 3], [10, 40, 20, 30], size=8, budget=64)
    [[1], [3, 2], [0]]
    """
    order = sorted(range(len(items)), key=lambda k: -lengths[k])
    chunks: list[list[int]] = []
    current: list[int] = []
    for k in order:
        longest = lengths[current[0]] if current else lengths[k]
        if current and (len(current) >= size or (len(current) + 1) * longest > budget):
            chunks.append([items[j] for j in current])
            current = []
        current.append(k)
    if current:
        chunks.append([items[j] for j in current])
    return chunks


class Learner:
    """Holds the trained model, PPO's critic when there is one, and their AdamW optimiser.

    The critic's parameters are a second parameter group (learning rate ``algo.critic_lr``)
    whose gradient norm is clipped on its own.
    """

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
        critic: Critic | None = None,
        compute_dtype: str = "float32",
    ) -> None:
        self.model, self.algo, self.trainer, self.critic = model, algo, trainer, critic
        masters = {p.dtype for p in model.parameters()}
        if masters != {torch.float32}:
            # bf16 parameters lose updates: at lr 1e-6 an Adam step is below bf16's resolution for most weights
            raise ValueError(f"the learner keeps float32 master weights; the model's parameters are {masters} (load "
                             "it in float32 and pass compute_dtype for bf16/fp16 compute)")
        #: the dtype forward passes compute in (autocast): float32 masters, ``compute_dtype`` matmuls
        self.compute_dtype = DTYPES[compute_dtype]
        self.temperature, self.norm_constant, self.pad_id = temperature, norm_constant, pad_id
        self.device = next(model.parameters()).device
        if trainer.gradient_checkpointing:
            # recompute each layer in the backward pass: activations of one layer at a time, not all of them
            # transformers 5.25 renamed it activation_checkpointing_enable and warns on the old name
            if hasattr(model, "activation_checkpointing_enable"):
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        self.module = ActorCritic(model, critic, chunk=trainer.logprob_chunk)
        #: FSDP2 under torchrun (``trainer.strategy=fsdp``): the parameters are shards (DTensors) from here on
        self.sharded = trainer.strategy == "fsdp" and distributed.active()
        # the module every training forward pass goes through: under torchrun, DDP around ``module``, or ``module``
        # itself sharded in place
        self.net: torch.nn.Module = (distributed.fully_sharded(model, self.module) if self.sharded
                                     else distributed.data_parallel(self.module))
        self.parallel = self.sharded or self.net is not self.module
        #: weights held under two names (a tied output head), read after sharding, which keeps ties it can: the
        #: sampler and the checkpoint take each such weight once, under its first name
        self.tied = tied_names(model)
        lr = lr if lr is not None else trainer.lr
        groups = [{"params": list(model.parameters()), "lr": lr}]
        if critic is not None:
            groups.append({"params": list(critic.parameters()),
                           "lr": algo.critic_lr if algo.critic_lr is not None else lr})
        self.optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=trainer.weight_decay,
                                           betas=(trainer.adam_betas[0], trainer.adam_betas[1]))
        self.generator = torch.Generator().manual_seed(seed)

    def _forward(self, batch: dict[str, torch.Tensor], values: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Learner logprobs of the targets (B, L-1), the entropy at each position (B, L-1) and, with
        ``values``, the critic's value of each turn (B,)."""
        with self._autocast():
            return self.net(batch["input_ids"], batch["attention_mask"], batch["targets"], batch["mask"],
                            self.temperature, batch["value_index"] if values else None)

    @torch.no_grad()
    def values(self, samples: Sequence[TurnSample]) -> list[float]:
        """The critic's value of each turn's prompt (PPO), in micro-batches without gradients."""
        if self.critic is None:
            raise ValueError("this learner has no critic (algo.name=ppo has one)")
        out: list[float] = []
        for start in range(0, len(samples), self.trainer.micro_batch_size):
            batch = pack(samples[start:start + self.trainer.micro_batch_size], self.pad_id, self.device)
            # the bare module: no gradients, nothing for DDP to do, and no collective that other ranks must join
            with self._autocast():
                _, _, v = self.module(batch["input_ids"], batch["attention_mask"], batch["targets"],
                                      torch.zeros_like(batch["mask"]), self.temperature, batch["value_index"])
            out += v.tolist()
        return out

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Compute in ``compute_dtype`` (the parameters and their gradients stay float32)."""
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def _minibatches(self, n: int) -> list[list[int]]:
        order = torch.randperm(n, generator=self.generator).tolist()
        size = math.ceil(n / self.trainer.minibatches)
        return [order[i:i + size] for i in range(0, n, size)]

    def _micro_batches(self, items: list[int], samples: Sequence[TurnSample] | None = None) -> Iterator[list[int]]:
        """``items`` in chunks of ``trainer.micro_batch_size`` turns, and with ``trainer.micro_batch_tokens`` (and
        ``samples``) of at most that many padded tokens, longest turns first; every chunk but the last under DDP's
        ``no_sync``, so the ranks' gradients are added once per optimiser step, in the last backward. A
        data-parallel rank with no items gets one empty chunk: every rank must run that one synchronising
        backward."""
        size, budget = self.trainer.micro_batch_size, self.trainer.micro_batch_tokens
        if budget is None or samples is None:
            chunks = [items[i:i + size] for i in range(0, len(items), size)]
        else:
            chunks = _token_chunks(items, [len(samples[i].prompt_ids) + len(samples[i].response_ids)
                                           for i in items], size, budget)
        chunks = chunks or ([[]] if self.parallel else [])
        if self.sharded:
            # every forward gathers each layer from all ranks: the ranks run as many micro-batches as the one with
            # the most (the others join with empty ones), and the gradients are reduced in each backward
            most = max(distributed.all_gather(len(chunks)))
            yield from chunks + [[] for _ in range(most - len(chunks))]
            return
        unsynced = self.net.no_sync if self.parallel else contextlib.nullcontext
        for k, chunk in enumerate(chunks):
            with unsynced() if k < len(chunks) - 1 else contextlib.nullcontext():
                yield chunk

    def _join_backward(self, critic: bool) -> None:
        """A backward of a zero loss that reaches every parameter, through DDP: the share of the all-reduce of
        a rank that has no turns in this step."""
        batch = pack([TurnSample([self.pad_id], [self.pad_id], [], "stop")], self.pad_id, self.device)
        with self._autocast():
            logprobs, _, values = self.net(batch["input_ids"], batch["attention_mask"], batch["targets"],
                                           batch["mask"], self.temperature, batch["value_index"] if critic else None)
        zero = logprobs.sum() * 0.0
        if values is not None:
            zero = zero + values.sum() * 0.0
        zero.backward()

    def _step(self) -> dict[str, float]:
        """Clip the policy's (and separately the critic's) gradient norm, step, zero; returns the norms."""
        clip = self.trainer.max_grad_norm
        limit = clip if clip is not None else float("inf")
        # a sharded model's norm is a DTensor: the whole gradient's, gathered
        norms = {"grad_norm": float(distributed.full_tensor(torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                                                            limit)))}
        if self.critic is not None:
            norms["critic_grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.critic.parameters(), limit))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norms

    def update(self, samples: Sequence[TurnSample], advantages: Sequence[float], seed: int | None = None,
               old_values: Sequence[float] | None = None, value_targets: Sequence[float] | None = None,
               ) -> dict[str, float]:
        """``algo.epochs`` passes of policy-gradient steps over the turns that have a response.

        ``seed`` reseeds the minibatch shuffle, so an update depends on its iteration only and a
        resumed run repeats an uninterrupted one. With a critic, ``old_values`` (its values when
        the advantages were computed) and ``value_targets`` (the GAE lambda-returns) train it in
        the same steps: ``loss = policy + algo.value_coef * mean clipped value loss``.

        Data-parallel, ``samples`` (and the lists beside it) are this rank's share and every rank
        calls ``update`` together. The shuffle draws minibatches of global indices (all ranks' turns
        in rank order, the same draws on every rank) and each rank trains on its members; the loss
        normaliser and the value loss's turn count are the global minibatch's. DDP averages the
        ranks' gradients, so each rank's loss is scaled by the world size: the step takes the
        gradient of the global batch's loss, the one a single process would take, and clipping
        sees the global gradient norm. The metrics are the global batch's too.
        """
        if seed is not None:
            self.generator.manual_seed(seed)
        keep = [i for i, s in enumerate(samples) if s.response_ids]
        samples = [samples[i] for i in keep]
        adv_all = torch.tensor([float(advantages[i]) for i in keep])
        critic = self.critic is not None
        if critic:
            if old_values is None or value_targets is None:
                raise ValueError("a learner with a critic needs old_values and value_targets")
            old_all = torch.tensor([float(old_values[i]) for i in keep])
            target_all = torch.tensor([float(value_targets[i]) for i in keep])
        # response lengths of every rank's turns: the global batch's layout, known to every rank
        shares = distributed.all_gather([len(s.response_ids) for s in samples])
        lengths = [n for share in shares for n in share]
        offset = sum(len(share) for share in shares[:distributed.rank()])
        if not lengths:
            return {}
        scale = float(distributed.world_size()) if self.parallel else 1.0
        self.net.train()
        totals: dict[str, float] = {}
        norms: dict[str, float] = {}
        steps = 0
        for _ in range(self.algo.epochs):
            for mb in self._minibatches(len(lengths)):
                norm = loss_normaliser(self.algo.loss_norm, len(mb), sum(lengths[i] for i in mb), self.norm_constant)
                mine = [i - offset for i in mb if offset <= i < offset + len(samples)]
                for idx in self._micro_batches(mine, samples):
                    if not idx:
                        self._join_backward(critic)
                        continue
                    batch = pack([samples[i] for i in idx], self.pad_id, self.device)
                    logprobs, ent, values = self._forward(batch, values=critic)
                    loss_sum, stats = policy_loss_sum(
                        logprobs, batch["old_logprobs"], adv_all[idx].to(self.device), batch["mask"],
                        self.algo.loss, self.algo.clip_eps, self.algo.tis_cap,
                    )
                    loss = loss_sum / norm
                    if values is not None:
                        v_sum = value_loss_sum(values, old_all[idx].to(self.device), target_all[idx].to(self.device),
                                               self.algo.value_clip)
                        loss = loss + self.algo.value_coef * v_sum / len(mb)
                        totals["value_loss"] = totals.get("value_loss", 0.0) + float(v_sum.detach())
                        totals["turns_seen"] = totals.get("turns_seen", 0.0) + len(idx)
                    (loss * scale).backward()
                    n = float(batch["mask"].sum())
                    stats["entropy"] = float((ent * batch["mask"]).sum()) / max(n, 1.0)
                    for key, value in stats.items():
                        totals[key] = totals.get(key, 0.0) + value * n
                    totals["loss"] = totals.get("loss", 0.0) + float(loss_sum.detach()) / norm
                    totals["tokens_seen"] = totals.get("tokens_seen", 0.0) + n
                for key, value in self._step().items():
                    norms[key] = norms.get(key, 0.0) + value
                steps += 1
        totals = distributed.all_sum(totals)
        tokens_seen = totals.pop("tokens_seen")
        turns_seen = totals.pop("turns_seen", 0.0)
        per_step = ("loss", "value_loss")
        metrics = {k: v / max(tokens_seen, 1.0) for k, v in totals.items() if k not in per_step}
        metrics["loss"] = totals["loss"] / steps
        if critic:
            metrics["value_loss"] = totals["value_loss"] / max(turns_seen, 1)  # per turn, before the coefficient
        metrics.update({k: v / steps for k, v in norms.items()})
        metrics["optimizer_steps"] = float(steps)
        return metrics

    def supervised_update(self, samples: Sequence[TurnSample]) -> dict[str, float]:
        """One optimiser step of token-mean negative log-likelihood on the responses (the SFT stage).

        Data-parallel, ``samples`` is this rank's share of the step's turns; the mean is over all ranks' tokens.
        """
        self.net.train()
        num_tokens = sum(sum(share) for share in distributed.all_gather([len(s.response_ids) for s in samples]))
        scale = float(distributed.world_size()) if self.parallel else 1.0
        total = 0.0
        for chunk in self._micro_batches(list(range(len(samples))), samples):
            if not chunk:
                self._join_backward(critic=False)
                continue
            batch = pack([samples[i] for i in chunk], self.pad_id, self.device)
            logprobs, _, _ = self._forward(batch)
            loss = -(logprobs * batch["mask"]).sum() / max(num_tokens, 1)
            (loss * scale).backward()
            total += float(loss.detach())
        return {"sft_loss": distributed.all_sum({"sft_loss": total})["sft_loss"], **self._step()}

    def iter_weights(self, dtype: torch.dtype | None = None,
                     device: str | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """The model's weights, detached, one at a time, for the engine: in ``dtype`` (the sampler's) when given,
        else the float32 masters, and on ``device`` when given (``cpu`` for a checkpoint); each cast as it is taken,
        so one tensor's copy exists at once, not the whole model's beside the woken sampler. Sharded (fsdp), each
        weight is gathered whole in turn on every rank: a collective, so every rank takes all of them, in order, on
        its main thread. A tied weight comes once, under its first name (the embedding: the engines and a
        checkpoint's loader tie the head to it), so the largest tensor is not gathered, cast and sent twice."""
        for k, v in self.model.state_dict().items():
            if k in self.tied:
                continue
            v = distributed.full_tensor(v.detach())
            if device is not None:
                v = v.to(device)
            yield k, v if dtype is None or not v.is_floating_point() else v.to(dtype)

    def state_dict(self, dtype: torch.dtype | None = None, device: str | None = None) -> dict[str, torch.Tensor]:
        """:meth:`iter_weights`, all of them at once."""
        return dict(self.iter_weights(dtype, device))

    def optimizer_state(self) -> dict[str, Any]:
        """The optimizer's state as a checkpoint holds it: sharded (fsdp), gathered whole and keyed by parameter
        name (a collective every rank calls; rank 0 gets it, the others an empty dict)."""
        if not self.sharded:
            return self.optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.module, self.optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`optimizer_state` (every rank passes the whole state it read)."""
        if not self.sharded:
            self.optimizer.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(self.module, self.optimizer, state, options=StateDictOptions(full_state_dict=True))
