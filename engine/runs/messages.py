"""The catalog of the run registry's and scheduler's refusals (``engine.runs.registry``, ``engine.runs.scheduler``): a
stable key and an English template, made into ``engine.core.messages.Message`` by ``message``; raised as
``RunsError(message(...))`` so the page can show them in its language (``studio.i18n``). Light: stdlib.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    "runs.unknown_id": "no run with id {id!r} (see `studio runs list`)",
    "runs.read_only": "run {id} is {owner}'s, shared with you read-only: only its owner (or an admin) may stop, "
    "delete, rename, tag or share it",
    "runs.share_unknown": "{name!r} is no account of this studio (see `studio users list`; * shares with everyone)",
    "runs.not_yours": "{field}: {path} is not in a run of yours (a member reads only their own runs' folders)",
    "runs.not_shared": "{field}: {path} is another member's upload or model (a member uses their own and what the "
    "operator or an admin added)",
    "runs.unknown": "no run with id {id!r}",
    "runs.no_free_id": "could not allocate a run id",
    "runs.id_taken": "run id {id} is already in the registry; submit again",
    "runs.bad_command": "command: expected a non-empty list of strings",
    "runs.delete_running": "run {id} is running: stop it first (`studio runs stop {id}`)",
    "runs.quota_queued": "{owner} has {n} runs waiting in the queue, their limit (studio users quota): wait for one "
    "to start, or remove one from the queue",
    "runs.quota_disk": "{owner}'s runs and jobs hold {used} of the workspace, their limit is {limit} (studio users "
    "quota): delete runs or exports no longer needed (the Runs tab, `studio runs delete`) before starting another",
    "runs.bad_name": "name: give 1 to 120 characters",
    "runs.is_command": "run {id} is a command, not a training run",
    "runs.still_running": "run {id} is still running",
    "runs.spec_bad_yaml": "not valid YAML: {error}",
    "runs.spec_invalid": "invalid",
    "runs.no_adapter": "{source}: no adapter_config.json there (is the run finished?)",
    "runs.wrapper_failed": "the run wrapper failed to start: {error}",
    # delete: what was removed and what was kept, and why
    "runs.deleted": "deleted run {id}",
    "runs.removed": "removed {path}",
    "runs.kept_owned": "kept {path}: it belongs to {owner}",
    "runs.kept_holds": "kept {path}: it holds {owner}",
    "runs.kept_outside": "kept {path}: it is outside the workspace (Studio removes only folders inside it)",
    "runs.remove_failed": "could not remove {path}: {error}",
    "runs.kept_not_created": "kept {path}: run {id} did not create it (it was there before the run started, or the "
    "run never started); a run owns only what it made",
    "runs.kept_existing": "kept {path}: it existed before run {id} started; removed only the {count} file(s) the run "
    "wrote in it",
    # output.overwrite (LLaMA-Factory's overwrite_output_dir): engine.runs.overwrite
    "runs.overwrite_replaces": "overwrite_output_dir: replaced {folder}, the output of run {id} ({count} file(s): "
    "{files}); run {id}'s record, run folder and logs are kept, marked as overwritten",
    "runs.overwrite_active": "overwrite_output_dir replaces only an ended run's output, and run {id} is {status}",
    "runs.overwrite_not_created": "overwrite_output_dir replaces only a folder the earlier run created, and run {id} "
    "did not create {folder}",
    "runs.overwrite_others": "overwrite_output_dir replaces only what the earlier run wrote, and {folder} also holds "
    "files run {id} did not write ({files})",
    "runs.kept_added": "kept {path}: it holds files added after run {id} ended ({files}); removed only the {count} "
    "file(s) the run wrote in it",
    # resume: the checkpoint a resumed run starts from
    "runs.checkpoint_skipped": "checkpoint {path} is incomplete or corrupt; falling back to an older one",
    "runs.no_loadable_checkpoint": "run {id} has no complete checkpoint to resume from (all in {path} and the one "
    "it started from are incomplete): duplicate it and start again",
    "runs.resumed": "resumed run {parent} as run {id} from {checkpoint}; its checkpoints go to {out} and its final "
    "weights to {weights}",
    "runs.from_scratch": "no checkpoint yet (it starts from scratch)",
    "runs.move_not_member": "only the operator or an admin moves a run in the queue (users take turns): run {id} "
    "keeps its place",
    "runs.not_queued": "run {id} is {status}, not queued (use `studio runs stop`)",
    # why a run ended, written by the runner into events.jsonl and by the registry into its reason column
    "runs.user_stop_early": "stopped by the user (process ended before it reported; {how})",
    "runs.user_stop_kept": "stopped by the user after step {step} (process ended before it reported; {how}); "
    "its last checkpoint on disk is {checkpoint}",
    # the trainer's own stopped event: Stop was pressed, it finished the step and saved (or could not save)
    "runs.user_stop_saved": "by the user at step {step}; checkpoint saved at {checkpoint}",
    "runs.user_stop_unsaved": "by the user at step {step}; no checkpoint was saved",
    "runs.how_signal": "signal {signal}",
    "runs.how_exit": "exit code {code}",
    "runs.killed_by_signal": "killed by signal {signal}",
    "runs.no_terminal_event": "exited with code {code} without a terminal event",
    "runs.user_stop": "stopped by the user ({how})",
    "runs.killed_by": "killed by {signal}",
    "runs.no_exit_record": "the run's processes ended without an exit record (its wrapper was killed)",
    "runs.exit0_unfinished": "the trainer exited with code 0 without reporting that it finished",
    "runs.command_exit": "the command exited with code {code}",
    "runs.trainer_exit": "the trainer exited with code {code}",
    # the registry healing itself (engine.runs.store.ensure_registry): printed at start, shown in the Runs tab
    "runs.registry_rebuilt_corrupt": (
        "the run registry was damaged ({error}): it is kept aside as {aside} and was rebuilt from {count} "
        "run folder(s)"
    ),
    "runs.registry_rebuilt_missing": "the run registry was missing: it was rebuilt from {count} run folder(s)",
    "runs.rebuilt_not_queued": "read back from its folder without a launch record, but it holds training output "
    "({path}): not queued again, so that output is not written over",
    "runs.registry_resynced": "the run registry did not know {count} run folder(s): they were added back from their "
    "folders",
    # a run whose trainer stopped writing (engine.runs.watchdog)
    "runs.stopped_before_start": "stopped before it started",
    "runs.stalled": "stalled (no progress for {duration})",
    # a write that failed for want of space or with an I/O error (the run, its wrapper or the registry)
    "runs.disk_full": "disk full: no space left on device under {path}",
    "runs.io_error": "I/O error writing under {path}: {error}",
    "runs.no_space": "not started: {free} free under {path}, a run needs at least {need}; free some space first",
    "runs.not_created": "the run was not created: {why}",
    "runs.slurm_missing": "Slurm's commands are missing ({tools} not found in {where}): install the Slurm client "
    "or set where sbatch lives (STUDIO_SLURM_BIN)",
    "runs.slurm_no_shared": "no shared run folder is set: Slurm runs need a folder every node sees at the same "
    "path (STUDIO_SLURM_SHARED)",
    "runs.slurm_shared_unusable": "the shared run folder {path} does not exist or cannot be written",
    "runs.slurm_not_shared": "the run folder {path} is on a local filesystem ({fs}) but the cluster has other "
    "nodes: set STUDIO_SLURM_SHARED to a folder on a shared filesystem (NFS, Lustre, ...)",
    "runs.slurm_submit_failed": "sbatch refused the job: {error}",
    "runs.slurm_active": "Slurm job {job}: {state}{reason}",
    "runs.slurm_cancelled": "cancelled (Slurm job {job})",
    "runs.slurm_ended": "Slurm job {job} ended: {state} ({slurm})",
    # a Slurm job's state in Studio's words (engine.runs.slurm.STATES), shown in runs.slurm_active
    "runs.slurm_state_pending": "pending",
    "runs.slurm_state_running": "running",
    "runs.slurm_state_completed": "completed",
    "runs.slurm_state_failed": "failed",
    "runs.slurm_state_cancelled": "cancelled",
    "runs.slurm_state_timeout": "timeout",
    "runs.slurm_state_node_failure": "node failure",
    "runs.slurm_state_out_of_memory": "out of memory",
    "runs.slurm_state_unknown": "state unknown",
    # why a pending job waits: Slurm's reason code (squeue(1), JOB REASON CODES) kept as Slurm writes it (people
    # search for it), with a short explanation on the page in its language (engine.runs.slurm.reason_message).
    # English keeps the code alone, as squeue prints it.
    "runs.slurm_reason_resources": " ({reason})",
    "runs.slurm_reason_priority": " ({reason})",
    "runs.slurm_reason_node_not_avail": " ({reason})",
    "runs.slurm_reason_begin_time": " ({reason})",
    "runs.slurm_reason_dependency": " ({reason})",
    "runs.slurm_reason_dependency_never": " ({reason})",
    "runs.slurm_reason_held_user": " ({reason})",
    "runs.slurm_reason_held_admin": " ({reason})",
    "runs.slurm_reason_partition_time_limit": " ({reason})",
    "runs.slurm_reason_partition_node_limit": " ({reason})",
    "runs.slurm_reason_partition_down": " ({reason})",
    "runs.slurm_reason_node_down": " ({reason})",
    "runs.slurm_reason_reservation": " ({reason})",
    "runs.slurm_reason_licenses": " ({reason})",
    "runs.slurm_reason_invalid_account": " ({reason})",
    "runs.slurm_reason_invalid_qos": " ({reason})",
    "runs.slurm_reason_bad_constraints": " ({reason})",
    "runs.slurm_reason_qos_limit": " ({reason})",
    "runs.slurm_reason_assoc_limit": " ({reason})",
    "runs.slurm_reason_prolog": " ({reason})",
    "runs.slurm_reason_cleaning": " ({reason})",
    "runs.slurm_reason_scheduling": " ({reason})",
    "runs.slurm_reason_launch_failed": " ({reason})",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
