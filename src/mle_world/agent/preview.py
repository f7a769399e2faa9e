"""AIDE-style data preview: a file tree of the task's public data plus a glance at each CSV.

Reads the data directory (never more than a few lines per file); writes nothing.
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

MAX_CHARS = 6000
_TEXT_SUFFIXES = {".txt", ".md"}


def _size(path: Path) -> str:
    try:
        size = float(path.stat().st_size)
    except OSError:
        return "?"
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def file_tree(root: Path, depth: int = 0, max_depth: int = 3) -> list[str]:
    """≤8 entries per directory (≤4 when it has over 30), as AIDE does."""
    try:
        entries = sorted(root.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    except OSError:
        return []
    limit = 4 if len(entries) > 30 else 8
    lines = []
    for entry in entries[:limit]:
        indent = "  " * depth
        if entry.is_dir():
            count = sum(1 for _ in entry.iterdir()) if depth < max_depth else 0
            lines.append(f"{indent}{entry.name}/ ({count} entries)")
            if depth < max_depth:
                lines.extend(file_tree(entry, depth + 1, max_depth))
        else:
            lines.append(f"{indent}{entry.name} ({_size(entry)})")
    if len(entries) > limit:
        lines.append(f"{'  ' * depth}... and {len(entries) - limit} more")
    return lines


def _csv_preview(path: Path, rows: int = 3) -> str:
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            sample = [row for _, row in zip(range(rows), reader, strict=False)]
            count = len(sample) + sum(1 for _ in reader)
    except (OSError, csv.Error) as error:
        return f"-> {path.name}: unreadable ({error})"
    columns = ", ".join(header[:30]) + (f", ... ({len(header)} columns)" if len(header) > 30 else "")
    lines = [f"-> {path.name} has {count} rows and {len(header)} columns: {columns}"]
    for row in sample:
        text = ", ".join(cell[:40] for cell in row[:15])
        lines.append(f"   {text}")
    return "\n".join(lines)


def _json_preview(path: Path) -> str:
    try:
        if path.stat().st_size > 200_000:
            return f"-> {path.name}: JSON ({_size(path)})"
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"-> {path.name}: unreadable JSON"
    kind = type(data).__name__
    keys = list(data)[:20] if isinstance(data, dict) else []
    return f"-> {path.name}: JSON {kind}" + (f" with keys {keys}" if keys else "")


def data_preview(root: Path) -> str:
    """The Data Overview section; falls back to the tree alone when over MAX_CHARS."""
    tree = "\n".join(file_tree(root))
    details = []
    # Image tasks hold 10^5 files: look at a bounded prefix of the walk instead of sorting it all.
    for path in sorted(itertools.islice(root.rglob("*"), 2000))[:200]:
        if not path.is_file() or path.name == "description.md":
            continue
        if path.suffix == ".csv":
            details.append(_csv_preview(path))
        elif path.suffix == ".json":
            details.append(_json_preview(path))
        elif path.suffix in _TEXT_SUFFIXES and path.stat().st_size < 1000:
            details.append(f"-> {path.name}:\n{path.read_text(encoding='utf-8', errors='replace')}")
        if len(details) >= 20:
            break
    full = f"```\n{tree}\n```\n\n" + "\n\n".join(details)
    if len(full) > MAX_CHARS:
        return f"```\n{tree}\n```"[:MAX_CHARS]
    return full


def task_description(root: Path) -> str:
    """MLE-bench's prepared public data carries description.md; fall back to any markdown file."""
    for name in ("description.md", "description.txt"):
        if (root / name).is_file():
            return (root / name).read_text(encoding="utf-8", errors="replace")
    for path in sorted(root.glob("*.md")):
        return path.read_text(encoding="utf-8", errors="replace")
    return "(no task description found in the data directory)"
