"""``studio data``: check and preview registered datasets, and share a member's dataset read-only (team mode).

Light: engine.data.dataset_registry and engine.core.belongings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.core import belongings
from engine.data import images
from engine.data.dataset_registry import STAGES, check_dataset, hub_pending, preview_rows, share_dataset
from engine.data.messages import message
from engine.data.rows import kto_counts


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="studio data", description="Inspect and share registered datasets.")
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("check", "preview"):
        p = sub.add_parser(action)
        p.add_argument("names", nargs="+", metavar="NAME")
        p.add_argument("--dataset-dir", default="", help="folder with dataset_info.json (default: the workspace's)")
        p.add_argument(
            "--stage", choices=STAGES, default=None, help="sft, pt, dpo, kto, rm or grpo (default: from the entry)"
        )
        p.add_argument("-n", type=int, default=3, help="rows to preview")
    p = sub.add_parser("share", help="team mode: share a member's dataset read-only")
    p.add_argument("name", metavar="NAME")
    p.add_argument("readers", nargs="+", metavar="ACCOUNT", help="accounts, * for everyone, none for nobody again")
    p.add_argument("--dataset-dir", default="", help="folder with dataset_info.json (default: the workspace's)")
    args = parser.parse_args(argv)
    if args.dataset_dir:
        ddir = Path(args.dataset_dir).expanduser()
    else:
        from engine.core import workspace

        ddir = workspace.data_dir()
    if args.action == "share":
        try:
            now = share_dataset(ddir, args.name, [] if args.readers == ["none"] else args.readers)
        except belongings.ShareError as exc:
            print(f"studio data share: {exc}", file=sys.stderr)
            return 1
        print(f"{args.name}: shared read-only with {', '.join(now) if now else 'nobody'}")
        return 0
    if args.action == "preview":
        for name in args.names:
            print(json.dumps({name: preview_rows(name, ddir, args.n, args.stage)}, ensure_ascii=False, indent=1))
        return 0
    failed = False
    for name in args.names:
        entry, stage, rows, problems = check_dataset(name, ddir, args.stage)
        if not problems and entry is not None and hub_pending([name], ddir):
            print(f"{name}: {message('data.hub_later', hub=entry.hub_id)}")
        elif problems:
            failed = True
            print(f"{name}: {len(problems)} problem(s)")
            for p in problems:
                print(f"  {p}")
        elif stage == "kto":
            print(str(message("data.kto_ok", name=name, rows=len(rows), **kto_counts(rows))))
        else:
            counted = images.count_images(rows)
            print(f"{name}: OK ({len(rows)} rows, stage {stage}" + (f", {counted} images)" if counted else ")"))
    return 1 if failed else 0
