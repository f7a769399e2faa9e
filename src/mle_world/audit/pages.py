"""HTML pages of the audit: `audit/index.html` and one page per trial, from jinja2 templates (autoescaped).

Reads the computed audit tables and trial page models; writes self-contained HTML files atomically.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mle_world.audit.trialview import TrialView
from mle_world.storage import write_text_atomic

if TYPE_CHECKING:
    import jinja2

PAGE_MODE = 0o644
"""Pages are readable by a static web server running as another user."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@cache
def environment() -> jinja2.Environment:
    """Templates shipped as package data; every value is escaped unless a template says otherwise."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mle_world.audit", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["duration"] = duration
    return env


def duration(seconds: float | None) -> str:
    """12.3s, 4m05s, 2h07m; '–' for unknown."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def trial_page_name(trial_id: str) -> str:
    """File name of a trial's page under `audit/trials/` (one flat, link-safe name per trial id)."""
    return _UNSAFE.sub("_", trial_id.replace("/", ".")) + ".html"


def render_trial_page(view: TrialView, index_href: str | None = None) -> str:
    """The trial page; `index_href` links back to the sweep report (relative, so file:// works)."""
    return render("trial.html.j2", view=view, index_href=index_href)


def write_trial_page(view: TrialView, path: Path, index_href: str | None = None) -> Path:
    write_text_atomic(path, render_trial_page(view, index_href), mode=PAGE_MODE)
    return path
