"""The price table: USD per token of hosted models and per GPU-hour of self-hosted servers and trials.

Reads `configs/prices.yaml` (or `--prices`); writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field, ValidationError

from mle_world.errors import ConfigError
from mle_world.plan.config import packaged_config, read_yaml
from mle_world.records import Record, Role

DEFAULT_PRICES = packaged_config("prices.yaml")


class _PriceModel(Record):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf priced everything inf


class TokenPrice(_PriceModel):
    """USD per 1M tokens of one model id."""

    input: float | None = Field(None, ge=0)
    output: float | None = Field(None, ge=0)
    cached_input: float | None = Field(None, ge=0)


class GpuHourPrice(_PriceModel):
    """A self-hosted server (or the trial's own GPU): GPUs and USD per GPU-hour."""

    gpus: int = Field(1, ge=1)
    usd_per_gpu_hour: float | None = Field(None, ge=0)


class Prices(_PriceModel):
    """configs/prices.yaml."""

    version: int
    as_of: str
    currency: str = "USD"
    models: dict[str, TokenPrice] = Field(default_factory=dict)
    self_hosted: dict[Role, GpuHourPrice] = Field(default_factory=dict)
    execution: GpuHourPrice = GpuHourPrice()


def load_prices(path: Path = DEFAULT_PRICES) -> Prices:
    """Load and validate the price table; ConfigError names the file."""
    data = read_yaml(path, "price table")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return Prices.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {loc}: {first['msg']}") from exc
