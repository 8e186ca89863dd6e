"""``DIR/summary.csv`` (and ``summary.parquet`` with pyarrow): one row per job, rewritten
atomically whenever a job changes state, so a reader never sees half a table."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simrun.outputs.atomic import atomic_write, atomic_write_text

FIXED = ("index", "status", "folder", "attempts", "seconds", "error")


@dataclass
class Row:
    index: int
    point: dict[str, str]  # swept KEY -> YAML text
    folder: str
    status: str = "pending"  # pending | queued | running | done | failed | interrupted
    attempts: int = 0
    seconds: float | None = None
    error: str = ""
    results: dict[str, float] = field(default_factory=dict)


def columns(rows: list[Row]) -> list[str]:
    """The swept KEYs in the sweep's order, then the results' names sorted: the order of
    a row's results depends on where they came from (the job just now, or its record read
    back by a resume), and the header must not."""
    keys = list(dict.fromkeys(k for r in rows for k in r.point))
    results = sorted({k for r in rows for k in r.results})
    return [FIXED[0], *keys, *FIXED[1:], *results]


def as_record(row: Row) -> dict[str, Any]:
    return {"index": row.index, **row.point, "status": row.status, "folder": row.folder,
            "attempts": row.attempts, "seconds": "" if row.seconds is None else row.seconds,
            "error": row.error, **row.results}


def write_summary(out_dir: Path, rows: list[Row]) -> Path:
    path = out_dir / "summary.csv"
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns(rows), restval="", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(as_record(row))
    atomic_write_text(path, buf.getvalue())
    _write_parquet(out_dir, rows)
    return path


def _write_parquet(out_dir: Path, rows: list[Row]) -> None:
    try:
        import pyarrow as pa  # optional dependency: pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        return

    names = columns(rows)
    table = pa.table({n: [str(as_record(r).get(n, "")) for r in rows] for n in names})
    atomic_write(out_dir / "summary.parquet", lambda f: pq.write_table(table, f))


def read_summary(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
