"""Prompts of the coder (draft/improve/debug), the reviewer and the world model, and code extraction.

Reads only the values passed in (task text, memory, budget view, nodes); writes nothing.

Longer than 400 lines because it holds the prompt texts themselves (AIDE's wording kept close).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mle_world.agent.budget import BudgetView
from mle_world.agent.journal import Node

Sections = Mapping[str, Any]

PACKAGES = (
    "numpy",
    "pandas",
    "scikit-learn",
    "statsmodels",
    "xgboost",
    "lightgbm",
    "torch",
    "torchvision",
    "timm",
    "bayesian-optimization",
    "torch-geometric",
)

RESPONSE_FORMAT = (
    "Your response should be a brief outline/sketch of your proposed solution in natural language "
    "(3-5 sentences), followed by a single markdown code block (wrapped in ```) which implements this "
    "solution and prints out the evaluation metric. There should be no additional headings or text in "
    "your response. Just natural language text followed by a newline and then the markdown code block."
)


def render_sections(sections: Sections | Sequence[Any] | str, depth: int = 1) -> str:
    """AIDE's prompt compiler: dict keys become headers of increasing depth, lists become bullets."""
    if isinstance(sections, str):
        return sections.strip()
    if isinstance(sections, Mapping):
        parts = []
        for key, value in sections.items():
            if value is None or value == "":
                continue
            parts.append(f"{'#' * depth} {key}\n\n{render_sections(value, depth + 1)}")
        return "\n\n".join(parts)
    return "\n".join(f"- {item}" for item in sections)


def clip_middle(text: str, limit: int | None) -> str:
    """`text` within `limit` characters: head and tail kept, the middle replaced by a marker line."""
    if limit is None or len(text) <= limit:
        return text
    if limit < 200:
        return "# [code omitted to fit the context window]"
    marker = f"\n# [... {len(text) - limit} characters omitted to fit the context window ...]\n"
    half = (limit - len(marker)) // 2
    return text[:half] + marker + text[len(text) - half :]


def format_duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} hours"
    if seconds >= 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:.0f} seconds"


@dataclass(frozen=True)
class PromptContext:
    """Everything the coder prompts show besides the parent node."""

    task: str
    memory: str
    budget: BudgetView
    exec_timeout_s: float
    debug_timeout_s: float
    data_preview: str | None = None
    obfuscate: bool = False
    ensemble: tuple[Node, ...] = field(default_factory=tuple)
    candidate: int = 0
    candidates: int = 1
    rng_seed: int = 0
    ensemble_chars: int | None = None
    """Characters of code shown per ensemble solution (None: whole files)."""

    @property
    def persona(self) -> str:
        return "an expert machine learning engineer" if self.obfuscate else "a Kaggle grandmaster"


def implementation_guideline(ctx: PromptContext) -> list[str]:
    """The fork's implementation guideline with Kapso's code requirements folded in."""
    timeout = format_duration(ctx.exec_timeout_s)
    return [
        f"<TOTAL_TIME_REMAINING: {format_duration(ctx.budget.time_left_s)}>",
        f"<TOTAL_STEPS_REMAINING: {ctx.budget.steps_left}>",
        "The code should **implement the proposed solution**, **print the value of the evaluation metric "
        "computed on a hold-out validation set**, **AND MOST IMPORTANTLY SAVE PREDICTIONS ON THE PROVIDED "
        "UNLABELED TEST DATA IN A `submission.csv` FILE IN THE ./submission/ DIRECTORY.**",
        "The code should be a single-file python program that is self-contained and can be executed "
        "as-is with `python runfile.py`.",
        "No parts of the code should be skipped, don't terminate before finishing the script.",
        "Your response should only contain a single code block.",
        f"Be aware of the running time of the code, it should complete within {timeout}.",
        "The script MUST accept a `--debug` command-line flag. With `--debug` it runs end to end "
        "quickly on a small subsample (a few hundred rows, one epoch) and still writes "
        "./submission/submission.csv. It is run with `--debug` first "
        f"(limit {format_duration(ctx.debug_timeout_s)}), then without it for the full run.",
        "Print progress while training and finally the validation metric on its own line as "
        "`Validation metric: <value>`.",
        "Use the GPU when one is available (e.g. `torch.device('cuda' if torch.cuda.is_available() "
        "else 'cpu')`) with a batch size that fits its memory.",
        "When training neural networks, use early stopping on the validation set and a learning-rate "
        "schedule.",
        'All the provided input data is stored in "./input" directory (read-only).',
        "**You MUST submit predictions on the provided unlabeled test data in a `submission.csv` "
        'file in the "./submission/" directory as described in the task description.** This is '
        "extremely important since this file is used for grading/evaluation. DO NOT FORGET THE "
        "submission.csv file!",
        'You can also use the "./working" directory to store any temporary files that your code needs '
        "to create.",
        "If it is reasonable, use 5-fold cross-validation to compute the evaluation metric.",
        "The environment variable `MLE_SEED` holds this run's random seed: seed every random number "
        "generator and `random_state` from `int(os.environ.get('MLE_SEED', '0'))`.",
    ]


def _stage_sections(ctx: PromptContext) -> dict[str, Any]:
    stage = ctx.budget.stage
    if stage is None:
        return {}
    out: dict[str, Any] = {
        "Budget stage": f"Current stage: {stage.name} (progress {ctx.budget.progress:.0%} of the "
        f"budget).\n{stage.guidance}"
    }
    if ctx.ensemble:
        out["Best solutions so far (for ensembling)"] = {
            f"Solution {i + 1} (validation metric {node.metric})": (
                f"```python\n{clip_middle(node.code, ctx.ensemble_chars)}\n```"
            )
            for i, node in enumerate(ctx.ensemble)
        }
    return out


def _installed_packages(ctx: PromptContext) -> str:
    packages = list(PACKAGES)
    random.Random(ctx.rng_seed).shuffle(packages)
    listed = ", ".join(f"`{p}`" for p in packages)
    return (
        f"Your solution can use any relevant machine learning packages such as: {listed}. Feel free to "
        "use any other packages too (all packages are already installed!). For neural networks we "
        "suggest using PyTorch rather than TensorFlow."
    )


def _diversity(ctx: PromptContext) -> str | None:
    if ctx.candidates <= 1:
        return None
    return (
        f"This is candidate {ctx.candidate + 1} of {ctx.candidates} generated in parallel for the same "
        "step; propose an idea that another candidate is unlikely to choose."
    )


def draft_messages(ctx: PromptContext) -> list[dict[str, str]]:
    sections: dict[str, Any] = {
        "Introduction": (
            f"You are {ctx.persona} attending a competition. In order to win this competition, you need "
            "to come up with an excellent and creative plan for a solution and then implement this "
            "solution in Python. We will now provide a description of the task."
        ),
        "Task description": ctx.task,
        "Memory": ctx.memory,
        **_stage_sections(ctx),
        "Instructions": {
            "Response format": RESPONSE_FORMAT,
            "Solution sketch guideline": [
                "This first solution design should be relatively simple, without ensembling or "
                "hyper-parameter optimization.",
                "Take the Memory section into consideration when proposing the design, don't propose "
                "the same modelling solution but keep the evaluation the same.",
                "The solution sketch should be 3-5 sentences.",
                "Propose an evaluation metric that is reasonable for this task.",
                "Don't suggest to do EDA.",
                "The data is already prepared and available in the `./input` directory. There is no "
                "need to unzip any files.",
            ],
            "Implementation guideline": implementation_guideline(ctx),
            "Installed Packages": _installed_packages(ctx),
        },
        "Candidate": _diversity(ctx),
        "Data Overview": ctx.data_preview,
    }
    return _as_messages(sections)


def improve_messages(ctx: PromptContext, parent: Node) -> list[dict[str, str]]:
    sections: dict[str, Any] = {
        "Introduction": (
            f"You are {ctx.persona} attending a competition. You are provided with a previously "
            "developed solution below and should improve it in order to further increase the "
            "(test time) performance. For this you should first outline a brief plan in natural "
            "language for how the solution can be improved and then implement this improvement in "
            "Python based on the provided previous solution."
        ),
        "Task description": ctx.task,
        "Memory": ctx.memory,
        **_stage_sections(ctx),
        "Instructions": {
            "Response format": RESPONSE_FORMAT,
            "Solution improvement sketch guideline": [
                "The solution sketch should be a brief natural language description of how the "
                "previous solution can be improved.",
                "You should be very specific and should only propose a single actionable improvement.",
                "This improvement should be atomic so that we can experimentally evaluate the effect "
                "of the proposed change.",
                "Take the Memory section into consideration when proposing the improvement.",
                "The solution sketch should be 3-5 sentences.",
                "Don't suggest to do EDA.",
            ],
            "Implementation guideline": implementation_guideline(ctx),
        },
        "Candidate": _diversity(ctx),
        "Previous solution": {"Code": f"```python\n{parent.code}\n```"},
    }
    return _as_messages(sections)


def debug_messages(ctx: PromptContext, parent: Node) -> list[dict[str, str]]:
    sections: dict[str, Any] = {
        "Introduction": (
            f"You are {ctx.persona} attending a competition. Your previous solution had a bug and/or "
            "did not produce a submission.csv, so based on the information below, you should revise it "
            "in order to fix this. Your response should be an implementation outline in natural "
            "language, followed by a single markdown code block which implements the bugfix/solution."
        ),
        "Task description": ctx.task,
        **_stage_sections(ctx),
        "Previous (buggy) implementation": f"```python\n{parent.code}\n```",
        "Execution output": f"```\n{parent.term_out}\n```",
        "Instructions": {
            "Response format": RESPONSE_FORMAT,
            "Bugfix improvement sketch guideline": [
                "You should write a brief natural language description (3-5 sentences) of how the issue "
                "in the previous implementation can be fixed.",
                "Don't suggest to do EDA.",
            ],
            "Implementation guideline": implementation_guideline(ctx),
        },
        "Candidate": _diversity(ctx),
        "Data Overview": ctx.data_preview,
    }
    return _as_messages(sections)


def _as_messages(sections: Sections) -> list[dict[str, str]]:
    # The fork's "<none>" user message: some chat templates refuse a conversation without one.
    return [{"role": "system", "content": render_sections(sections)}, {"role": "user", "content": "<none>"}]


# ---- review -----------------------------------------------------------------------------

REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": "Submit a review evaluating the output of the training script.",
        "parameters": {
            "type": "object",
            "properties": {
                "is_bug": {
                    "type": "boolean",
                    "description": "true if the output log shows that the execution failed or has some "
                    "bug, otherwise false.",
                },
                "has_csv_submission": {
                    "type": "boolean",
                    "description": "true if the code saves the predictions on the test data in a "
                    "`submission.csv` file in the `./submission/` directory, otherwise false.",
                },
                "summary": {
                    "type": "string",
                    "description": "write a short summary (2-3 sentences) describing the empirical "
                    "findings. Alternatively mention if there is a bug or the submission.csv was not "
                    "properly produced. DO NOT suggest fixes or improvements.",
                },
                "metric": {
                    "type": ["number", "null"],
                    "description": "If the code ran successfully, report the value of the validation "
                    "metric. Otherwise, leave it null.",
                },
                "lower_is_better": {
                    "type": "boolean",
                    "description": "true if the metric should be minimized (i.e. a lower metric value is "
                    "better, such as with MSE), false if it should be maximized.",
                },
            },
            "required": ["is_bug", "has_csv_submission", "summary", "metric", "lower_is_better"],
        },
    },
}
REVIEW_TOOL_CHOICE: dict[str, Any] = {"type": "function", "function": {"name": "submit_review"}}


def review_messages(task: str, node: Node, *, obfuscate: bool, json_fallback: bool) -> list[dict[str, str]]:
    persona = "an expert machine learning engineer" if obfuscate else "a Kaggle grandmaster"
    sections: dict[str, Any] = {
        "Introduction": (
            f"You are {persona} attending a competition. You have written code to solve this task and "
            "now need to evaluate the output of the code execution. You should determine if there were "
            "any bugs as well as report the empirical findings."
        ),
        "Task description": task,
        "Implementation": f"```python\n{node.code}\n```",
        "Execution output": f"```\n{node.term_out}\n```",
    }
    if json_fallback:
        properties = REVIEW_TOOL["function"]["parameters"]["properties"]
        fields = "\n".join(f"- `{name}`: {spec['description']}" for name, spec in properties.items())
        sections["Response format"] = (
            "Answer with a single JSON object and nothing else, with exactly these keys:\n" + fields
        )
    return _as_messages(sections)


# ---- world model ------------------------------------------------------------------------

WORLD_SYSTEM = (
    "You are an expert machine learning engineer acting as a world model: you predict the outcome of "
    "running a candidate solution script WITHOUT running it. Reason briefly from the task, the data and "
    "the code, then end your answer with exactly one JSON object."
)


@dataclass(frozen=True)
class WorldContext:
    """What the world model may see; `blind` keeps only the task and the candidate (and says that a
    best solution exists without its score, so that the question asked stays the same)."""

    task: str
    blind: bool
    data_preview: str | None = None
    reference: Node | None = None
    """The parent (full context only): its code, metric and output tail."""
    best_metric: float | None = None
    lower_is_better: bool | None = None
    has_best: bool = False
    """Whether a best (good) node exists; shown in blind mode too, without its metric."""
    debug_timeout_s: float | None = None
    exec_timeout_s: float | None = None
    gpu: str | None = None
    """CUDA_VISIBLE_DEVICES given to the scripts (None: no GPU)."""
    code_chars: int | None = None
    """Characters of each code shown (None: whole files); set when the context window is small."""


def _reference_sections(ctx: WorldContext) -> dict[str, Any]:
    if ctx.blind:
        if not ctx.has_best:
            return {"Best so far": "There is no working solution yet."}
        return {
            "Best so far": "A working solution with a validation metric already exists; its score (and "
            "code) are hidden from you."
        }
    out: dict[str, Any] = {"Data Overview": ctx.data_preview}
    if ctx.reference is not None:
        ref = ctx.reference
        status = "buggy" if ref.is_buggy else f"validation metric {ref.metric}"
        out["Parent solution"] = {
            "Result": status,
            "Code": f"```python\n{clip_middle(ref.code, ctx.code_chars)}\n```",
            "Output tail": f"```\n{ref.term_out[-1500:]}\n```",
        }
    if ctx.best_metric is not None:
        direction = "lower" if ctx.lower_is_better else "higher"
        out["Best so far"] = (
            f"The best validation metric so far is {ctx.best_metric} ({direction} is better)."
        )
    elif not ctx.has_best:
        out["Best so far"] = "There is no working solution yet."
    return out


def execution_protocol(ctx: WorldContext) -> list[str]:
    """How candidates are run and judged: the rules the world model's probabilities refer to."""
    debug = format_duration(ctx.debug_timeout_s) if ctx.debug_timeout_s is not None else "a short limit"
    full = format_duration(ctx.exec_timeout_s) if ctx.exec_timeout_s is not None else "the run limit"
    gpu = f"one GPU (CUDA_VISIBLE_DEVICES={ctx.gpu})" if ctx.gpu else "no GPU (CPU only)"
    return [
        f"The script is first run as `python runfile.py --debug` (a quick subsample run) with a limit of {debug}.",
        f"Only if that run exits cleanly is the full run `python runfile.py` started, with a limit of {full}.",
        f"Hardware: {gpu}. The data is in ./input (read-only); the script must write "
        "./submission/submission.csv.",
        "A reviewer then reads the output and reports the validation metric the script printed.",
    ]


BUGGY_RULE = (
    "the `--debug` run or the full run raises, exits non-zero or exceeds its time limit; or no "
    "./submission/submission.csv is written; or no validation metric is reported; or the reviewer finds "
    "a bug in the output"
)


def pointwise_messages(ctx: WorldContext, candidate: Node) -> list[dict[str, str]]:
    sections: dict[str, Any] = {
        "Task description": ctx.task,
        **_reference_sections(ctx),
        "Candidate solution": {
            "Plan": candidate.plan,
            "Code": f"```python\n{clip_middle(candidate.code, ctx.code_chars)}\n```",
        },
        "Execution protocol": execution_protocol(ctx),
        "Instructions": (
            "Predict what happens when the candidate runs. Return one JSON object with keys:\n"
            f'- "p_bug": probability (0-1) that the run counts as buggy, which is the case when {BUGGY_RULE};\n'
            '- "p_improves": probability (0-1) that it runs correctly AND its validation metric beats the '
            "best so far (when there is none yet: that it produces a valid, working solution);\n"
            '- "predicted_metric": the validation metric you expect, or null;\n'
            '- "confidence": your confidence (0-1) in this prediction;\n'
            '- "rationale": one or two sentences.'
        ),
    }
    return [
        {"role": "system", "content": WORLD_SYSTEM},
        {"role": "user", "content": render_sections(sections)},
    ]


def pairwise_messages(
    ctx: WorldContext, a: Node, b: Node, labels: tuple[str, str] = ("A", "B")
) -> list[dict[str, str]]:
    sections: dict[str, Any] = {
        "Task description": ctx.task,
        **_reference_sections(ctx),
        f"Solution {labels[0]}": {
            "Plan": a.plan,
            "Code": f"```python\n{clip_middle(a.code, ctx.code_chars)}\n```",
        },
        f"Solution {labels[1]}": {
            "Plan": b.plan,
            "Code": f"```python\n{clip_middle(b.code, ctx.code_chars)}\n```",
        },
        "Execution protocol": execution_protocol(ctx),
        "Instructions": (
            "Predict which solution will achieve the better validation metric when run (a buggy "
            f"solution is worse; a run is buggy when {BUGGY_RULE}). Do not assume the more complex one wins without justification. Return "
            'one JSON object with keys "better" ("A" or "B"), "confidence" (0-1) and "rationale".'
        ),
    }
    return [
        {"role": "system", "content": WORLD_SYSTEM},
        {"role": "user", "content": render_sections(sections)},
    ]


# ---- response parsing -------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def strip_think(text: str) -> str:
    return _THINK.sub("", text)


def has_code_block(text: str) -> bool:
    """The text holds a complete (closed) fenced block."""
    return _FENCE.search(strip_think(text)) is not None


def extract_plan_and_code(text: str) -> tuple[str, str]:
    """The fork's extraction: the first ```python block (else the first fenced block, else a text that
    looks like code); the plan is the text before it. Adds a `__main__` guard when `def main(` has none.
    """
    text = strip_think(text)
    blocks = list(_FENCE.finditer(text))
    chosen = next((m for m in blocks if m.group(1).lower() in ("python", "py", "python3")), None)
    if chosen is None and blocks:
        chosen = blocks[0]
    if chosen is not None:
        plan = text[: chosen.start()].strip()
        code = chosen.group(2).strip("\n")
    elif re.search(r"^\s*(import |from \w+ import |def |print\()", text, re.MULTILINE):
        plan, code = "", text.strip()
    else:
        plan, code = text.strip(), ""
    if "def main(" in code and "__name__" not in code:
        code += '\n\n\nif __name__ == "__main__":\n    main()\n'
    return plan, code
