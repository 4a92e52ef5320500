"""``studio runs|queue|replay``: the run registry from a terminal, safe to use while the web UI runs.

Light: argparse, engine.runs.registry / events / spec; never torch. ``cli(argv)`` takes the command name first
("runs", "queue" or "replay"), as engine.cli passes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

from engine.core import events
from engine.lf.compat import load_any_spec
from engine.runs import fingerprints, records, scheduler, slurm, watchdog
from engine.runs import registry as runs
from engine.runs.messages import message as run_message
from engine.spec.schema import SpecError, parse_spec


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _duration(rec: records.RunRecord) -> str:
    if not rec.started:
        return "-"
    secs = int((rec.ended or time.time()) - rec.started)
    return f"{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}"


def _status(rec: records.RunRecord) -> str:
    """The registry's status ("stalled (no progress for ...)" for a stalled run); a cluster run's also says its Slurm
    job, its state and why it waits (running · Slurm job 12: pending (Resources))."""
    job = slurm.describe(rec)
    status = str(watchdog.status_text(rec))
    return f"{status} · {job}" if job is not None else status


def _table(recs: list[records.RunRecord]) -> str:
    rows = [("ID", "STATUS", "NAME", "GPUS", "STARTED", "TIME", "TAGS")]
    rows += [
        (
            r.id,
            str(_status(r)),
            r.name[:40],
            ",".join(map(str, r.gpus)) or "cpu" if r.started else "-",
            _fmt_time(r.started),
            _duration(r),
            ",".join(r.tags),
        )
        for r in recs
    ]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def _show(rec: records.RunRecord) -> str:
    lines = [
        f"{k:12} {v}"
        for k, v in (
            ("id", rec.id),
            ("name", rec.name),
            ("status", _status(rec)),  # as `runs list` and the page say it (stalled included)
            ("kind", rec.kind),
            ("slurm", slurm.describe(rec) or "-"),
            ("created", _fmt_time(rec.created)),
            ("started", _fmt_time(rec.started)),
            ("ended", _fmt_time(rec.ended)),
            ("duration", _duration(rec)),
            ("gpus", rec.gpus or "-"),
            ("pid/pgid", f"{rec.pid}/{rec.pgid}"),
            ("exit code", rec.exit_code),
            ("run dir", rec.run_dir),
            ("output dir", rec.output_dir),
            ("tags", ", ".join(rec.tags) or "-"),
        )
    ]
    evs = events.read_all(rec.events_path)
    logs = [e for e in evs if e["type"] == "log" and "loss" in e["payload"]]
    if logs:
        last = logs[-1]
        lines.append(
            f"{'last log':12} step {last['step']} loss {last['payload'].get('loss')} "
            f"progress {last['payload'].get('progress')}"
        )
    if rec.reason:
        lines.append(f"{'reason':12} {rec.reason}")
    alerts = [e for e in evs if e["type"] == "alert"]
    if alerts:
        lines.append(f"{'alerts':12} {len(alerts)}")
        for a in alerts:
            p = a["payload"]
            lines.append(f"  step {a['step']}  {p.get('rule')} ({p.get('action')}): {p.get('reason')}")
    return "\n".join(lines)


def _follow(rec: records.RunRecord, lines: int | None = None) -> int:
    """Print the log's last ``lines`` lines (all with None), then what the run writes until it ends."""
    try:
        with open(rec.log_path, "rb") as fh:
            head = fh.read()
    except FileNotFoundError:
        head = b""
    offset = len(head)  # following goes on from here (a line being written is finished by what follows)
    if lines is not None:
        head = b"".join(head.splitlines(keepends=True)[-lines:]) if lines > 0 else b""
    sys.stdout.write(head.decode("utf-8", "replace"))
    sys.stdout.flush()
    while True:
        try:
            with open(rec.log_path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
        elif not runs.get(rec.id).active:
            return 0
        time.sleep(0.5)


def _parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"studio {name}")
    sub = p.add_subparsers(dest="action", required=True)
    if name == "runs":
        ls = sub.add_parser("list", help="every run, newest first")
        ls.add_argument("--status", choices=records.STATUSES)
        ls.add_argument("--json", action="store_true")
        sub.add_parser("show", help="one run in detail").add_argument("id")
        lg = sub.add_parser("logs", help="the run's train.log")
        lg.add_argument("id")
        lg.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")
        lg.add_argument("-n", type=int, default=100, help="lines (default 100)")
        st = sub.add_parser("stop", help="SIGTERM (checkpoint and exit), SIGKILL after the grace period")
        st.add_argument("id")
        st.add_argument("--grace", type=float, default=20.0)
        de = sub.add_parser("delete", help="forget a run and delete the files it owns (says what it removed and kept)")
        de.add_argument("id")
        de.add_argument("--yes", action="store_true", help="do not ask")
        de.add_argument("--keep-files", action="store_true")
        rn = sub.add_parser("rename", help="set the name a run is shown by (page, runs list)")
        rn.add_argument("id")
        rn.add_argument("name")
        tg = sub.add_parser("tag", help="set tags (comma-separated; empty clears)")
        tg.add_argument("id")
        tg.add_argument("tags")
        rs = sub.add_parser("resume", help="a new run (own folder) continuing from the newest checkpoint")
        rs.add_argument("id")
        sh = sub.add_parser("share", help="team mode: share a run read-only with accounts (* everyone; none: nobody)")
        sh.add_argument("id")
        sh.add_argument("names", nargs="+", help="account names, * for every account, or none")
    else:
        add = sub.add_parser("add", help="validate a spec (ours or a LLaMA-Factory training YAML) and queue it")
        add.add_argument("spec")
        add.add_argument("--accelerate-config", help="a LLaMA-Factory user's accelerate config YAML")
        add.add_argument("--name")
        add.add_argument("--tags", default="")
        sub.add_parser("list", help="queued and running runs, in queue order")
        sub.add_parser("remove", help="take a queued run off the queue").add_argument("id")
        sub.add_parser(
            "first", help="move a queued run to the front of the queue (the operator, an admin)"
        ).add_argument("id")
    return p


def cli(argv: list[str]) -> int:
    if not argv or argv[0] not in ("runs", "queue", "replay"):
        print("usage: studio runs|queue|replay ...", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    if name == "replay":
        return replay_cli(rest)
    args = _parser(name).parse_args(rest)
    try:
        return _runs(args) if name == "runs" else _queue(args)
    except records.RunsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def _runs(args) -> int:
    if args.action == "list":
        watchdog.check()  # a run whose wrapper died is recorded as ended, and the queue moves on
        recs = runs.list_runs(args.status)
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            **r.__dict__,
                            "spec": None,
                            "stalled_s": watchdog.stalled_for(r),
                            "slurm": slurm.read_state(r) if r.kind == slurm.KIND else None,
                        }
                        for r in recs
                    ],
                    indent=2,
                )
            )
        else:
            print(_table(recs) if recs else "no runs yet (`studio queue add SPEC` or the web page)")
    elif args.action == "show":
        watchdog.check()  # as `runs list`: a run whose wrapper died reads ended here too
        print(_show(runs.get(args.id)))
    elif args.action == "logs":
        rec = runs.get(args.id)
        if args.follow:
            return _follow(rec, args.n)
        print(runs.log_tail(args.id, args.n))
    elif args.action == "stop":
        ok = runs.stop(args.id, grace_s=args.grace)
        print(f"{args.id}: {runs.get(args.id).status}" + ("" if ok else " (some processes could not be ended)"))
        return 0 if ok else 1
    elif args.action == "delete":
        rec = runs.get(args.id)
        if not args.yes:
            if not sys.stdin.isatty():  # a script, CI, a pipe: nobody to answer (input() ended in an EOFError)
                print(
                    f"studio runs delete: no terminal to confirm on: pass --yes to delete run {rec.id}",
                    file=sys.stderr,
                )
                return 2
            answer = input(f"delete run {rec.id} ({rec.name}) and its files in {rec.run_dir}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("kept")
                return 1
        report = runs.delete(args.id, remove_files=not args.keep_files)
        print("\n".join(report.lines()))
    elif args.action == "rename":
        runs.rename(args.id, args.name)
    elif args.action == "tag":
        runs.set_tags(args.id, args.tags.split(","))
    elif args.action == "share":
        shared = runs.share(args.id, [] if args.names == ["none"] else args.names)
        print(f"{args.id} is shared with {', '.join(shared) or 'nobody'}")
    elif args.action == "resume":
        new_id = runs.resume(args.id)
        print(new_id)  # alone on the first line, for scripts
        print(runs.resume_report(new_id))
    return 0


def _queue(args) -> int:
    if args.action == "add":
        tags = [t for t in args.tags.split(",") if t.strip()]
        spec = load_any_spec(args.spec, args.accelerate_config)  # as studio train / validate / preview take it
        run_id = runs.submit(spec, name=args.name, tags=tags)
        print(f"{run_id}: {runs.get(run_id).status}")
    elif args.action == "list":
        watchdog.check()
        recs = [*sorted(runs.list_runs("running"), key=lambda r: r.id), *scheduler.queue_order()]
        print(_table(recs) if recs else "the queue is empty")
    elif args.action == "remove":
        rec = runs.get(args.id)
        if rec.status != "queued":
            raise records.RunsError(run_message("runs.not_queued", id=args.id, status=rec.status))
        runs.stop(args.id)
        print(f"removed {args.id} from the queue")
    elif args.action == "first":
        runs.move_first(args.id)
        print(f"{args.id} is first in the queue")
    return 0


# ----------------------------------------------------------------------------------------------- replay
def replay_cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="studio replay", description="start a new run from a run's record")
    p.add_argument("run_id")
    p.add_argument("--dry-run", action="store_true", help="only list what differs")
    args = p.parse_args(argv)
    try:
        rec = runs.get(args.run_id)
        data = yaml.safe_load((Path(rec.run_dir) / "spec.yaml").read_text(encoding="utf-8"))
    except (records.RunsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in replay_differences(Path(rec.run_dir), data):
        print(f"warning: {line}")
    if args.dry_run:
        return 0
    try:
        new_id = runs.submit(data, name=f"{rec.name} (replay)", tags=[*rec.tags, f"replay-of:{rec.id}"])
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"{new_id}: {runs.get(new_id).status}")
    return 0


def replay_differences(rdir: Path, spec_data: dict) -> list[str]:
    """What is not as it was when the run was recorded: package versions, dataset and tokenizer files."""
    try:
        record = json.loads((rdir / "record.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ["no record.json (the run never got as far as training): replaying from spec.yaml only"]
    out = fingerprints.version_differences(record)
    try:
        spec = parse_spec(spec_data)
    except SpecError as exc:
        return [*out, f"the spec no longer validates: {exc}"]
    return out + fingerprints.file_differences(record, spec)
