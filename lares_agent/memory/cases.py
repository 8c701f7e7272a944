"""A SQLite store of accepted reward candidates across runs, searched with FTS5/BM25.

The seed's RAG idea: before proposing, fetch rewards that worked on similar tasks. Cases are small rows
(components as JSON plus scalars); the FTS5 index covers the task name, the task description, the
rationale and the expressions, so "pick up the puck" finds cases of `pick-place-v3` by their words. BM25
ranks the text match and fitness breaks ties, so the best similar cases come first.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lares_agent.errors import LaresError

__all__ = ["Case", "CaseStore", "default_case_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cases (
    id INTEGER PRIMARY KEY,
    candidate_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    task TEXT NOT NULL,
    description TEXT NOT NULL,
    components TEXT NOT NULL,
    rationale TEXT NOT NULL,
    fitness REAL,
    success REAL,
    complexity REAL NOT NULL,
    persona TEXT NOT NULL,
    round INTEGER NOT NULL,
    created REAL NOT NULL,
    UNIQUE (run_id, candidate_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS cases_fts USING fts5(task, description, rationale, expressions);
"""
_WORD = re.compile(r"[A-Za-z0-9_]+")


def default_case_path() -> Path:
    """`$LARES_HOME/cases.sqlite`, else `~/.cache/lares-agent/cases.sqlite`."""
    home = os.environ.get("LARES_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "lares-agent"
    return base / "cases.sqlite"


@dataclass(frozen=True)
class Case:
    """One accepted candidate as remembered across runs."""

    task: str
    description: str
    components: Mapping[str, str]
    complexity: float
    run_id: str
    candidate_id: str
    rationale: str = ""
    fitness: float | None = None
    success: float | None = None
    persona: str = ""
    round: int = 0
    case_id: int | None = field(default=None, compare=False)


def _row_to_case(row: sqlite3.Row) -> Case:
    return Case(
        task=row["task"],
        description=row["description"],
        components=json.loads(row["components"]),
        complexity=row["complexity"],
        run_id=row["run_id"],
        candidate_id=row["candidate_id"],
        rationale=row["rationale"],
        fitness=row["fitness"],
        success=row["success"],
        persona=row["persona"],
        round=row["round"],
        case_id=row["id"],
    )


def fts_query(text: str) -> str:
    """An FTS5 query that ORs the words of `text`; each word is quoted so user text is never query syntax."""
    words = sorted({w.lower() for w in _WORD.findall(text.replace("-", " ")) if len(w) > 1})
    return " OR ".join(f'"{w}"' for w in words)


class CaseStore:
    """Accepted candidates across runs. Open one per process; it is safe to share across threads."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_case_path()
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        with self._tx() as cur:
            cur.executescript(_SCHEMA)

    def check_writable(self) -> None:
        """Write one header field back unchanged, then roll back: the schema statements above write nothing to
        a store that exists already, so only a real write shows a read-only file or folder (sqlite3.Error)."""
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(f"PRAGMA user_version = {version}")
        finally:
            self._conn.rollback()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        cur = self._conn.cursor()
        try:
            yield cur
            self._conn.commit()
        except sqlite3.Error as exc:
            self._conn.rollback()
            # sqlite's own text ("attempt to write a readonly database") names no file
            raise LaresError(f"cannot write the case store {self.path}: {exc}; fix: set LARES_HOME to a writable "
                             "folder, or pass --no-retrieval") from exc
        except BaseException:
            self._conn.rollback()
            raise
        finally:
            cur.close()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> CaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, case: Case) -> int:
        """Insert (or, for the same run and candidate id, replace) a case; returns its row id."""
        expressions = " ".join(case.components.values())
        comps = json.dumps(dict(case.components), sort_keys=True)
        with self._tx() as cur:
            old = cur.execute(
                "SELECT id FROM cases WHERE run_id = ? AND candidate_id = ?", (case.run_id, case.candidate_id)
            ).fetchone()
            if old is not None:
                cur.execute("DELETE FROM cases WHERE id = ?", (old["id"],))
                cur.execute("DELETE FROM cases_fts WHERE rowid = ?", (old["id"],))
            cur.execute(
                "INSERT INTO cases (candidate_id, run_id, task, description, components, rationale, fitness, "
                "success, complexity, persona, round, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (case.candidate_id, case.run_id, case.task, case.description, comps, case.rationale, case.fitness,
                 case.success, float(case.complexity), case.persona, int(case.round), time.time()),
            )
            row_id = int(cur.lastrowid or 0)
            cur.execute(
                "INSERT INTO cases_fts (rowid, task, description, rationale, expressions) VALUES (?,?,?,?,?)",
                (row_id, case.task.replace("-", " "), case.description, case.rationale, expressions),
            )
        return row_id

    def update_fitness(self, run_id: str, candidate_id: str, fitness: float, success: float | None = None) -> bool:
        """Record the fitness a candidate earned once its policy was evaluated; False if no such case."""
        with self._tx() as cur:
            cur.execute(
                "UPDATE cases SET fitness = ?, success = COALESCE(?, success) WHERE run_id = ? AND candidate_id = ?",
                (float(fitness), success, run_id, candidate_id),
            )
            return cur.rowcount > 0

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0])

    def best(self, task: str, k: int = 3, exclude_run: str | None = None) -> list[Case]:
        """The k fittest cases of exactly `task` (cases without a fitness come last)."""
        rows = self._conn.execute(
            "SELECT * FROM cases WHERE task = ? AND run_id != ? "
            "ORDER BY fitness IS NULL, fitness DESC, complexity ASC, id ASC LIMIT ?",
            (task, exclude_run or "", int(k)),
        ).fetchall()
        return [_row_to_case(r) for r in rows]

    def search(
        self, query: str, k: int = 3, exclude_run: str | None = None, min_fitness: float | None = None
    ) -> list[Case]:
        """The k cases best matching `query` (BM25 over task, description, rationale, expressions).

        Ties in text relevance are broken by fitness, then by lower complexity. Returns [] for a query
        without words.
        """
        match = fts_query(query)
        if not match:
            return []
        rows = self._conn.execute(
            "SELECT c.*, bm25(cases_fts, 4.0, 1.0, 0.5, 0.5) AS rank FROM cases_fts "
            "JOIN cases c ON c.id = cases_fts.rowid WHERE cases_fts MATCH ? AND c.run_id != ? "
            "AND (? IS NULL OR c.fitness >= ?) "
            "ORDER BY round(rank, 6) ASC, c.fitness IS NULL, c.fitness DESC, c.complexity ASC, c.id ASC LIMIT ?",
            (match, exclude_run or "", min_fitness, min_fitness, int(k)),
        ).fetchall()
        return [_row_to_case(r) for r in rows]
