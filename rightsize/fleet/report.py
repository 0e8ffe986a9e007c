"""The fleet report: where a fleet's GPU-hours and money go, and what fixing it saves.

Input: the table's rows (one per key, :meth:`FleetTable.rows`; jobs of traces, source
``trace``, and workloads of cluster metrics, source ``metrics``), :class:`Filters` (team,
project, recorded days, source) and optional :class:`Usage` (GPU-hours per month by job label).
Output: :class:`FleetReport` (:mod:`rightsize.fleet.report_model`), which the text, JSON and
HTML renderers all take. Pure polars over the rows.

Definitions (docs/fleet.md):

* Jobs are read at their latest recording: a path set recorded again (new content at the same
  paths), or a metrics workload over a newer window, counts once, by its newest row;
  ``changes`` compares each week's own latest rows.
* GPU-hours: with ``--usage``, each label's GPU-hours per month go to the newest ok trace row
  whose ``job`` (else ``project``) is that label, and a metrics workload's are its GPUs held x
  730 h; without it, a run directory's own wall time times its GPUs and a metrics workload's
  window times its GPUs held (``run_gpu_hours``); other jobs have none and are counted as such.
  Cost is GPU-hours times the current GPU's price per GPU-hour (``usd_per_gpu_hour``).
* Savings of an over-provisioned job: a metrics workload's own cost per month now less
  recommended; a trace job's ``savings_pct`` of its cost per 1k steps, i.e. per month
  ``gpu_hours x usd_per_gpu_hour x savings_pct / 100`` when its GPU-hours per month are known
  (``--usage``), else per 1k steps ``usd_per_1k_steps - recommended_usd_per_1k_steps``.
* Bottlenecks: the tuning rules that fired, by trace jobs; a rule's gain is the median over
  those jobs of ``1 - what_if.step_ms / step_ms`` (the predicted step if the fix is applied).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

from rightsize import __version__
from rightsize.fleet.report_model import (
    Bottleneck,
    Change,
    Filters,
    FleetReport,
    Group,
    JobLine,
    Saving,
    Usage,
    UsageError,
    Week,
    read_usage,
)
from rightsize.fleet.schema import HOURS_PER_MONTH, SOURCE_METRICS

__all__ = ["Bottleneck", "Change", "Filters", "FleetReport", "Group", "JobLine", "Saving",
           "Usage", "UsageError", "Week", "build", "read_usage"]

WEEK = timedelta(days=7)
SHOWN = 50  # rows listed per section (the JSON says how many there are in all)
JOBS_SHOWN = 200
NEWEST = ["recorded_at", "job"]  # newest first, then by name


def _filtered(rows: pl.LazyFrame, f: Filters) -> pl.LazyFrame:
    if f.teams:
        rows = rows.filter(pl.col("team").is_in(list(f.teams)))
    if f.projects:
        rows = rows.filter(pl.col("project").is_in(list(f.projects)))
    if f.sources:
        rows = rows.filter(pl.col("source").is_in(list(f.sources)))
    day = pl.col("recorded_at").dt.date()
    if f.since is not None:
        rows = rows.filter(day >= f.since)
    if f.until is not None:
        rows = rows.filter(day <= f.until)
    return rows


METRICS = pl.col("source") == SOURCE_METRICS
# What one job is across recordings: its entity when the row names one (a job's captures; a
# metrics workload, and a traced job naming the same Kubernetes workload: one entity); else a
# metrics workload's name (its labels), whatever its window or the source it was read from;
# else a trace job's path set
IDENTITY = (pl.when(pl.col("entity").is_not_null()).then(pl.col("entity"))
            .when(METRICS).then(pl.lit("workload:") + pl.col("job"))
            .otherwise(pl.col("paths").list.join("\n")))
NOT_DIAGNOSED = "not diagnosed (metrics)"  # a metrics workload's bottleneck: no trace to say
WINDOW_H = (pl.col("recorded_at") - pl.col("window_start")).dt.total_seconds() / 3600


def _latest_per_paths(df: pl.DataFrame) -> pl.DataFrame:
    """Each job at its latest recording; an entity seen both in metrics and in a trace is its
    latest trace (a capture's diagnosis and sizing rest on more than counters)."""
    return (df.with_columns(IDENTITY.alias("_pathset"), (~METRICS).alias("_traced"))
            .sort("_traced", "recorded_at")
            .unique("_pathset", keep="last", maintain_order=True)
            .drop("_pathset", "_traced").sort("recorded_at", maintain_order=True))


def _month_hours() -> pl.Expr:
    """A metrics workload's GPU-hours per month: its window's GPU-hours at the same rate for
    730 h (its GPUs held x 730)."""
    return pl.col("run_gpu_hours") * HOURS_PER_MONTH / WINDOW_H


def _with_hours(df: pl.DataFrame, usage: Usage | None) -> tuple[pl.DataFrame, list[str]]:
    """``gpu_hours`` per row (see the module docstring) and the usage labels left unmatched."""
    if usage is None:
        return df.with_columns(pl.col("run_gpu_hours").alias("gpu_hours")), []
    ok = df.filter((pl.col("status") == "ok") & ~METRICS).sort("recorded_at", descending=True)
    newest_job = dict(zip(*ok.unique("job", keep="first").select("job", "key"), strict=True))
    newest_project = dict(zip(*ok.filter(pl.col("project").is_not_null())
                              .unique("project", keep="first").select("project", "key"),
                              strict=True))
    hours: dict[str, float] = {}
    unmatched = []
    for label, h in usage.hours_per_month.items():
        key = newest_job.get(label) or newest_project.get(label)
        if key is None:
            unmatched.append(label)
        else:
            hours[key] = hours.get(key, 0.0) + h
    mapped = pl.DataFrame({"key": list(hours), "gpu_hours": list(hours.values())},
                          schema={"key": pl.String, "gpu_hours": pl.Float64})
    df = df.join(mapped, on="key", how="left").with_columns(
        pl.when(METRICS).then(_month_hours()).otherwise(pl.col("gpu_hours")).alias("gpu_hours"))
    return df, sorted(unmatched)


def _groups(df: pl.DataFrame, by: pl.Expr) -> tuple[Group, ...]:
    g = (df.group_by(by.alias("name"))
         .agg(pl.len().alias("jobs"), pl.col("gpu_hours").is_not_null().sum().alias("wh"),
              pl.col("gpu_hours").sum().alias("h"), pl.col("cost").sum().alias("c"),
              pl.col("cost").is_not_null().sum().alias("wc"))
         .sort(["h", "jobs", "name"], descending=[True, True, False], nulls_last=True))
    return tuple(Group(r["name"], r["jobs"], r["wh"], r["h"] if r["wh"] else None,
                       r["c"] if r["wc"] else None) for r in g.iter_rows(named=True))


def _iso(v: datetime | None) -> str:
    return v.isoformat() if v is not None else ""


def _savings(df: pl.DataFrame, monthly: bool) -> pl.DataFrame:
    """Over-provisioned jobs with their savings. A trace job's per month only when
    ``gpu_hours`` are GPU-hours per month (``--usage``), never from a run's own hours; a
    metrics workload's from its own cost per month, now less recommended."""
    over = df.filter((pl.col("status") == "ok")
                     & (pl.col("sizing_verdict") == "over-provisioned"))
    hours = pl.col("gpu_hours") if monthly else pl.lit(None, pl.Float64)
    over = _latest_per_paths(over).with_columns(
        (pl.col("usd_per_1k_steps") - pl.col("recommended_usd_per_1k_steps"))
        .alias("per_1k"),
        pl.when(METRICS).then(_month_hours()).otherwise(hours).alias("month_h"),
        pl.when(METRICS)
        .then(pl.col("usd_per_month") - pl.col("recommended_usd_per_month"))
        .otherwise(hours * pl.col("usd_per_gpu_hour") * pl.col("savings_pct") / 100)
        .alias("per_month"))
    return over.sort(["per_month", "per_1k", "job"], descending=[True, True, False],
                     nulls_last=True)


def _saving(r: dict[str, Any]) -> Saving:
    return Saving(r["key"], r["job"], r["source"], r["team"], r["project"],
                  _iso(r["recorded_at"]), r["gpu"], r["gpus"], r["recommended_gpu"],
                  r["recommended_gpus"], r["recommended"], r["confidence_level"], r["bound"],
                  r["savings_pct"], r["usd_per_1k_steps"], r["recommended_usd_per_1k_steps"],
                  r["per_1k"], r["month_h"], r["per_month"], r["sizing_reason"],
                  r["document"])


def _bottlenecks(ok: pl.DataFrame) -> tuple[Bottleneck, ...]:
    """Over the ok trace jobs (a metrics workload has no tuning rules to fire)."""
    ok = ok.filter(~METRICS)
    if ok.height == 0:
        return ()
    rules = (ok.select("key", "step_ms", "rules").explode("rules").drop_nulls("rules")
             .unnest("rules")
             .with_columns(((1 - pl.col("what_if_ms") / pl.col("step_ms")) * 100).alias("gain")))
    g = (rules.group_by("id")
         .agg(pl.col("title").unique().sort(), pl.col("key").n_unique().alias("jobs"),
              pl.col("gain").median().alias("gain"),
              pl.col("title").alias("per_job"))
         .sort(["jobs", "id"], descending=[True, False]))
    return tuple(Bottleneck(r["id"], _title(r["title"], r["per_job"]), r["jobs"],
                            100 * r["jobs"] / ok.height, r["gain"])
                 for r in g.head(SHOWN).iter_rows(named=True))


_RANK = re.compile(r"^Rank (\d+) holds up the collectives$")


def _title(titles: list[str], per_job: list[str]) -> str:
    """A rule's title over the jobs it fired on: its own when they all read the same, else
    the straggler rule's ranks each with its jobs ("Ranks hold up the collectives: rank 1 in 2
    jobs, rank 3 in 1") or the first with how many others differ."""
    if len(titles) == 1:
        return titles[0]
    ranks = [m.group(1) for m in map(_RANK.match, per_job) if m]
    if len(ranks) == len(per_job):
        counts = sorted(Counter(ranks).items(), key=lambda x: (-x[1], int(x[0])))
        return "Ranks hold up the collectives: " + ", ".join(
            f"rank {r} in {n} job{'s' if n > 1 else ''}" for r, n in counts)
    return f"{titles[0]} (and {len(titles) - 1} other wording(s))"


def _week(df: pl.DataFrame, start: date, end: date, monthly: bool) -> Week:
    w = _latest_per_paths(df.filter(pl.col("recorded_at").dt.date().is_between(start, end)))
    ok = w.filter(pl.col("status") == "ok").with_columns(
        pl.when(METRICS).then(pl.lit(NOT_DIAGNOSED)).otherwise(pl.col("bound")).alias("bound"))
    over = _savings(w, monthly)["per_month"].drop_nulls()

    def counts(col: str, none: str) -> dict[str, int]:
        c = ok.group_by(pl.col(col).fill_null(none)).len().sort(col)
        return dict(zip(c[col].to_list(), c["len"].to_list(), strict=True))

    return Week(start.isoformat(), end.isoformat(), w.height,
                counts("sizing_verdict", "not sized"), counts("bound", "none"),
                float(over.sum()) if over.len() else None)


def _line(r: dict[str, Any]) -> JobLine:
    return JobLine(r["key"], r["job"], r["source"], r["team"], r["project"],
                   _iso(r["recorded_at"]), r["status"], r["reason"], r["gpu"], r["gpus"],
                   r["bound"], r["sizing_verdict"], r["recommended_gpu"], r["recommended"],
                   r["confidence_level"], r["savings_pct"], r["document"])


def build(rows: pl.LazyFrame, table: str, filters: Filters | None = None,
          usage: Usage | None = None) -> FleetReport:
    """The report over ``rows`` (see the module docstring for every definition)."""
    filters = filters or Filters()
    df = _filtered(rows, filters).collect()
    df = df.with_columns(pl.col("rules").list.eval(
        pl.element().struct.rename_fields(["id", "title", "what_if_ms", "low", "high"])))
    df, unmatched = _with_hours(df, usage)
    df = df.with_columns((pl.col("gpu_hours") * pl.col("usd_per_gpu_hour")).alias("cost"))
    latest = _latest_per_paths(df)
    ok = latest.filter(pl.col("status") == "ok")
    monthly = usage is not None
    over = _savings(latest, monthly)
    hours = ok["gpu_hours"].drop_nulls()
    cost = ok["cost"].drop_nulls()
    with_hours = hours.len()
    metrics = int(ok.select(METRICS.sum()).item())
    if usage is not None:
        source = "usage"
        matched = len(usage.hours_per_month) - len(unmatched)
        note = (f"GPU-hours per month from {usage.source}: {matched} of "
                f"{len(usage.hours_per_month)} labels matched a job"
                + (f"; {metrics} metrics workloads: their GPUs held x {HOURS_PER_MONTH:g} h"
                   if metrics else ""))
    elif with_hours:
        source = "run"
        note = (f"GPU-hours of {with_hours} of {ok.height} jobs: run directories' wall time x "
                "GPUs" + (" and metrics workloads' window x GPUs held" if metrics else "")
                + "; the others have none (pass --usage for GPU-hours per month)")
    else:
        source = "none"
        note = ("no GPU-hours: no job is a run directory and no --usage was given; costs are "
                "per 1k steps")
    days = latest["recorded_at"].dt.date()
    until = filters.until or (days.max() if days.len() else None)
    this = prev = None
    changed: list[Change] = []
    if isinstance(until, date):
        this = _week(df, until - WEEK + timedelta(days=1), until, monthly)
        prev = _week(df, until - 2 * WEEK + timedelta(days=1), until - WEEK, monthly)
        changed = _changes(df, until)
    per_month = over["per_month"].drop_nulls()
    status = latest["status"]
    return FleetReport(
        table=table, generated_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        version=__version__,
        filters={"teams": list(filters.teams), "projects": list(filters.projects),
                 "since": filters.since.isoformat() if filters.since else None,
                 "until": filters.until.isoformat() if filters.until else None,
                 "sources": list(filters.sources)},
        first_day=str(days.min()) if days.len() else None,
        last_day=str(days.max()) if days.len() else None,
        jobs=latest.height, ok=ok.height, bad_input=int((status == "bad-input").sum()),
        failed=int((status == "failed").sum()), hours_source=source, hours_note=note,
        usage_unmatched=tuple(unmatched),
        gpu_hours=float(hours.sum()) if with_hours else None,
        cost_usd=float(cost.sum()) if cost.len() else None,
        by_verdict=_groups(ok, pl.col("sizing_verdict").fill_null("not sized")),
        by_bound=_groups(ok, pl.when(METRICS).then(pl.lit(NOT_DIAGNOSED))
                         .otherwise(pl.col("bound").fill_null("none"))),
        by_team=_groups(ok, pl.col("team").fill_null("unlabelled")),
        by_source=_groups(ok, pl.col("source")),
        over_provisioned=tuple(_saving(r) for r in over.head(SHOWN).iter_rows(named=True)),
        over_provisioned_total=over.height,
        savings_per_month_usd=float(per_month.sum()) if per_month.len() else None,
        bottlenecks=_bottlenecks(ok),
        this_week=this, previous_week=prev, changed=tuple(changed),
        errors=tuple(_line(r) for r in latest.filter(pl.col("status") != "ok")
                     .sort(NEWEST, descending=[True, False]).head(SHOWN)
                     .iter_rows(named=True)),
        job_lines=tuple(_line(r) for r in latest.sort(NEWEST, descending=[True, False])
                        .head(JOBS_SHOWN).iter_rows(named=True)),
    )


def _changes(df: pl.DataFrame, until: date) -> list[Change]:
    """Path sets recorded in both weeks whose verdict (bound, sizing) differs."""
    day = pl.col("recorded_at").dt.date()
    ok = df.filter(pl.col("status") == "ok")

    def week(start: date, end: date) -> pl.DataFrame:
        w = _latest_per_paths(ok.filter(day.is_between(start, end)))
        return w.with_columns(IDENTITY.alias("_p"),
                              (pl.col("bound").fill_null("none") + " / "
                               + pl.col("sizing_verdict").fill_null("not sized")).alias("_v"))

    now = week(until - WEEK + timedelta(days=1), until)
    before = week(until - 2 * WEEK + timedelta(days=1), until - WEEK)
    both = now.join(before.select("_p", pl.col("_v").alias("_was")), on="_p")
    both = both.filter(pl.col("_v") != pl.col("_was")).sort("job").head(SHOWN)
    return [Change(r["job"], r["key"], r["_was"], r["_v"], r["document"])
            for r in both.iter_rows(named=True)]
