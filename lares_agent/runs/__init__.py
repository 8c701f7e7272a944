"""runs layer: the single owner of a run folder's files (docs/ARCHITECTURE.md, "Run directory").

Every file name (:mod:`~lares_agent.runs.layout`), atomic writes (:mod:`~lares_agent.runs.atomic`), JSONL
append/read with torn-line mending (:mod:`~lares_agent.runs.jsonl`) and one typed schema per record kind,
shared by the writers and the readers: metrics, events, candidates, LLM calls. A whole run read into those records
(:mod:`~lares_agent.runs.reader`) and the reward it hands over (:mod:`~lares_agent.runs.selected`) are imported from
their modules: the report, `lares export` and the search read them.
"""

from lares_agent.runs.atomic import atomic_write_bytes, atomic_write_text
from lares_agent.runs.candidates import VERDICTS, CandidateRow, Verdict
from lares_agent.runs.events import EVENT_KINDS, Event, EventKind, RewardUpdateRecord
from lares_agent.runs.files import RecordFile, RunLog
from lares_agent.runs.health import LLMHealth, RecordedOutcome, llm_health, recorded_outcome, spent_wall_s
from lares_agent.runs.jsonl import JsonlWriter, append_jsonl, read_jsonl, to_jsonable
from lares_agent.runs.layout import (
    CANDIDATES_NAME,
    CHECKPOINTS_NAME,
    CONFIG_NAME,
    EVENTS_NAME,
    FEATURE_SAMPLE_NAME,
    FINAL_POLICY,
    LLM_CALLS_NAME,
    METRICS_NAME,
    POLICIES_NAME,
    REPORT_NAME,
    RUN_FILE_NAMES,
    RUN_MARKERS,
    TRACE_NAME,
    NotARunError,
    RunLayout,
)
from lares_agent.runs.llm_calls import LLMCallRow
from lares_agent.runs.marker import RUN_FORMAT, RUN_FORMAT_VERSION, check_marker, marked, read_marked_config
from lares_agent.runs.metrics import METRIC_KINDS, MetricKind, MetricRow
from lares_agent.runs.repair import SESSION_EVENTS, log_sizes, short_logs, truncate_logs
from lares_agent.runs.slots import VIEWS, SlotRecord, SlotView

__all__ = [
    "CANDIDATES_NAME",
    "CHECKPOINTS_NAME",
    "CONFIG_NAME",
    "EVENTS_NAME",
    "EVENT_KINDS",
    "FEATURE_SAMPLE_NAME",
    "FINAL_POLICY",
    "LLM_CALLS_NAME",
    "METRICS_NAME",
    "METRIC_KINDS",
    "POLICIES_NAME",
    "REPORT_NAME",
    "RUN_FILE_NAMES",
    "RUN_FORMAT",
    "RUN_FORMAT_VERSION",
    "RUN_MARKERS",
    "SESSION_EVENTS",
    "TRACE_NAME",
    "VERDICTS",
    "VIEWS",
    "CandidateRow",
    "Event",
    "EventKind",
    "JsonlWriter",
    "LLMCallRow",
    "LLMHealth",
    "MetricKind",
    "MetricRow",
    "NotARunError",
    "RecordFile",
    "RecordedOutcome",
    "RewardUpdateRecord",
    "RunLayout",
    "RunLog",
    "SlotRecord",
    "SlotView",
    "Verdict",
    "append_jsonl",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_marker",
    "llm_health",
    "log_sizes",
    "marked",
    "read_jsonl",
    "read_marked_config",
    "recorded_outcome",
    "short_logs",
    "spent_wall_s",
    "to_jsonable",
    "truncate_logs",
]
