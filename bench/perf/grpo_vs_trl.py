"""`bench perf` section `grpo_vs_trl`: one GRPO step (generation + update) of our pieces vs TRL's
GRPOTrainer on the same model and prompts."""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.perf import comparison, skipped, timed


def parity_reward(text: str) -> float:
    """The benchmark's trivial reward: 1 if the completion text has an even length, else 0."""
    return float(len(text) % 2 == 0)


def _trl_parity_reward(completions: list[str], **_: Any) -> list[float]:
    return [parity_reward(c) for c in completions]


# ---- grpo_vs_trl -------------------------------------------------------------------------------
def grpo_vs_trl_section(model: Any, tokenizer: Any, repeats: int, quick: bool) -> dict[str, Any]:
    """Seconds per GRPO step (generate a batch, reward it, one policy update) of ours vs TRL's
    GRPOTrainer, on the same saved model, batch, completion length and optimizer."""
    try:
        import trl  # noqa: F401
        from trl import GRPOConfig, GRPOTrainer  # noqa: F401
    except Exception as exc:  # ImportError, or a trl that does not import with these versions
        return skipped(f"trl cannot be imported: {type(exc).__name__}: {exc}")
    n_prompts, G, L = (2, 4, 8) if quick else (8, 8, 32)
    measured = 1 if quick else 2  # timed steps per block; each block starts with one untimed step
    lr = 1e-5
    with tempfile.TemporaryDirectory(prefix="bench-perf-trl-") as tmp:
        model_dir = Path(tmp) / "model"
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        bos = tokenizer.bos_token or ""
        texts = [f"{bos}{a}+{b}=?\n" for a in range(1, 10) for b in range(1, 10)]
        ours = _OurGRPO(model_dir, n_prompts, G, L, lr)
        theirs = _TrlGRPO(model_dir, Path(tmp) / "trl", texts, n_prompts, G, L, lr, steps=measured + 1)
        runs_ours, runs_trl = [], []
        phases: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}
        for block in range(repeats):  # interleaved blocks; the first step of each is not timed
            for side in (ours, theirs) if block % 2 == 0 else (theirs, ours):
                times = side.run(measured + 1, texts)
                (runs_ours if side is ours else runs_trl).extend(times[1:])
                phases["ours" if side is ours else "peer"].extend(side.phases[-measured:])
    return comparison(
        "seconds_per_step",
        runs_ours,
        runs_trl,
        peer=f"trl {_version('trl')} GRPOTrainer",
        ratio="ours / peer (seconds per step)",
        target=0.5,
        higher_is_better=False,
        phases_median_s={side: _median_phases(p) for side, p in phases.items()},
        setup={
            "prompts_per_step": n_prompts,
            "group_size": G,
            "completions_per_step": n_prompts * G,
            "max_completion_tokens": L,
            "optimizer": f"AdamW lr {lr}, weight decay 0, grad clip 1.0",
            "loss": "GRPO ppo-clip 0.2, seq-mean-token-mean (TRL loss_type='grpo'), beta 0, 1 iteration",
            "reward": "parity of the completion text length (same function for both)",
            "sampling": "temperature 1, top_p 1, no top-k, eos allowed",
            "timed_steps_per_side": len(runs_ours),
        },
        notes=[
            "ours: one step = TorchEngine.generate of the batch + rewards + build_batch + Learner.train_step "
            "(GRPO defaults; one minibatch, so the old-policy log-probs are the graded forward's, detached, as in "
            "TRL with one iteration) + the weight push to the engine; the "
            "engine decodes on its own thread setting (1 thread for this model size)",
            "TRL: wall time between on_step_begin and on_step_end callbacks of trainer.train() (generation "
            "with model.generate, rewards, forward, backward, AdamW step), use_vllm False, gradient "
            "accumulation 1, generation_batch_size = per_device_train_batch_size = completions_per_step",
            "both load the same saved model and tokenizer from one temp dir; blocks of steps alternate "
            "between the two and the first step of every block is not timed (warm-up)",
            "phases_median_s: per-step medians of each part; TRL's are timed by wrapping its model's generate() "
            "and the trainer's compute_loss() (the loss forward); its 'rest' is backward, optimizer step, "
            "rewards, tokenisation and bookkeeping",
        ],
    )


def _median_phases(steps: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s.get(k, 0.0) for s in steps) for k in steps[0]} if steps else {}


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class _OurGRPO:
    """Our GRPO step from the harness's pieces: engine generation, rewards, learner update."""

    def __init__(self, model_dir: Path, n_prompts: int, group: int, max_tokens: int, lr: float) -> None:
        from algorithms import registry
        from bench.engines.base import SamplingParams
        from bench.engines.torch_engine import TorchEngine
        from bench.models.loading import load_model_and_tokenizer
        from bench.train.learner import Learner

        policy, self.tokenizer = load_model_and_tokenizer(str(model_dir))
        grpo = registry.get("grpo")
        self.learner = Learner(
            grpo(grpo.Config(group_size=group)),
            policy.train(),
            policy_lr=lr,
            critic_lr=lr,
            grad_clip=1.0,
            minibatches=1,
            temperature=1.0,
            nan_patience=3,
        )
        self.engine = TorchEngine(
            copy.deepcopy(self.learner.unwrapped_policy).eval(),
            self.tokenizer,
            max_batch_size=n_prompts * group,
        )
        self.sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=max_tokens)
        self.n_prompts, self.group, self.max_tokens = n_prompts, group, max_tokens
        self.steps = 0
        self.phases: list[dict[str, float]] = []  # per step: seconds of each part

    def run(self, steps: int, texts: list[str]) -> list[float]:
        """Wall seconds of each of `steps` GRPO steps."""
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            self._step(texts)
            times.append(time.perf_counter() - start)
        return times

    def _step(self, texts: list[str]) -> None:
        from bench.engines.base import GenerationRequest
        from bench.rollout.episode import Trajectory
        from bench.train.learner import build_batch

        tok, s = self.tokenizer, self.steps
        prompts = [texts[(s * self.n_prompts + p) % len(texts)] for p in range(self.n_prompts)]
        prompt_ids = tok(text=prompts)["input_ids"]  # the same call TRL makes on plain-text prompts
        requests = [
            GenerationRequest(f"s{s}-p{p}-g{g}", prompt_ids[p], self.sampling, seed=(s * 1000 + p) * 100 + g)
            for p in range(self.n_prompts)
            for g in range(self.group)
        ]
        owners = [p for p in range(self.n_prompts) for _ in range(self.group)]
        generate_s, completions = timed(lambda: self.engine.generate(requests))
        trajectories = []
        for p, c in zip(owners, completions):
            trajectories.append(
                Trajectory(
                    prompt_key=prompts[p],
                    group_id=p,
                    prompt_ids=c.prompt_ids,
                    response_ids=c.token_ids,
                    action_mask=[1] * len(c.token_ids),
                    rollout_logp=c.logprobs,
                    versions=c.versions,
                    reward=parity_reward(tok.decode(c.token_ids, skip_special_tokens=True)),
                    truncated=c.finish_reason == "length",
                )
            )
        batch = build_batch(trajectories, tok.pad_token_id, self.max_tokens)
        learner_s, _ = timed(lambda: self.learner.train_step(batch))
        push_s, _ = timed(
            lambda: self.engine.update_weights(
                self.learner.unwrapped_policy.state_dict(), self.learner.version
            )
        )
        self.phases.append({"generate": generate_s, "learner_train_step": learner_s, "weight_push": push_s})
        self.steps += 1


class _TrlGRPO:
    """TRL's GRPOTrainer on the same model; `run` trains a few steps and returns their times."""

    def __init__(
        self,
        model_dir: Path,
        out_dir: Path,
        texts: list[str],
        n_prompts: int,
        group: int,
        max_tokens: int,
        lr: float,
        steps: int,
    ) -> None:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        timer = self.timer = _StepTimes(TrainerCallback)
        config = GRPOConfig(
            output_dir=str(out_dir),
            per_device_train_batch_size=n_prompts * group,
            num_generations=group,
            generation_batch_size=n_prompts * group,
            gradient_accumulation_steps=1,
            max_completion_length=max_tokens,
            max_steps=steps,
            learning_rate=lr,
            lr_scheduler_type="constant",
            warmup_steps=0,
            optim="adamw_torch",
            weight_decay=0.0,
            max_grad_norm=1.0,
            beta=0.0,
            num_iterations=1,
            loss_type="grpo",
            epsilon=0.2,
            scale_rewards="group",
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            use_vllm=False,
            report_to="none",
            logging_steps=1_000_000,
            save_strategy="no",
            dataloader_num_workers=0,
            use_cpu=True,
            bf16=False,
            disable_tqdm=True,
            seed=0,
        )
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            reward_funcs=_trl_parity_reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": texts}),
            processing_class=tokenizer,
            callbacks=[timer.callback],
        )
        # attribution only: time the generate() and loss-forward calls inside each step
        timer.wrap(self.trainer.model, "generate", "generate")
        timer.wrap(self.trainer, "compute_loss", "loss_forward")

    def run(self, steps: int, texts: list[str]) -> list[float]:
        """Wall seconds of each step of one `trainer.train()` of `steps` steps."""
        self.trainer.args.max_steps = steps
        self.timer.times.clear()
        self.trainer.train()
        return list(self.timer.times)

    @property
    def phases(self) -> list[dict[str, float]]:
        """Per step: seconds in generate(), in the loss forward, and the rest (backward, step, rewards...)."""
        return self.timer.phases


class _StepTimes:
    """A TrainerCallback (built lazily: transformers is imported only here) recording each step's
    wall time, and the time spent in wrapped methods during it."""

    def __init__(self, base: type) -> None:
        self.times: list[float] = []
        self.phases: list[dict[str, float]] = []
        self._current: dict[str, float] = {}
        self._start = 0.0
        outer = self

        class Callback(base):  # type: ignore[misc, valid-type]
            def on_step_begin(self, args, state, control, **kwargs):
                outer._current = {}
                outer._start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                seconds = time.perf_counter() - outer._start
                outer.times.append(seconds)
                outer.phases.append({**outer._current, "rest": seconds - sum(outer._current.values())})

        self.callback = Callback()

    def wrap(self, obj: Any, method: str, phase: str) -> None:
        """Replace `obj.method` (on the instance) by a version that adds its time to `phase`."""
        inner = getattr(obj, method)

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._current[phase] = self._current.get(phase, 0.0) + time.perf_counter() - start

        setattr(obj, method, timed_call)
