"""The confined worker of one user reward function: ``python -I reward_worker.py IN_FD OUT_FD FILE FUNCTION CPU_S
MEMORY_MB``, started by ``engine.trainer.reward_confine`` (with no secrets in its environment, in a network namespace
of its own where the machine allows).

Stdlib only, run by its path in isolated mode (``-I``: no PYTHON* variables, no user site, not even this folder on
``sys.path``), so nothing of Studio is imported beside the user's code. Its limits are set before the user's file is
imported: memory (``RLIMIT_AS``), no core files, and before the import and each call ``CPU_S`` seconds of CPU time
(``RLIMIT_CPU``: the kernel stops the process with SIGXCPU past it; the caller names the function). One JSON request
a line on IN_FD (``{"prompts", "completions", "kwargs"}``), one JSON answer a line on OUT_FD: ``{"values": [...]}``
(a value that is not a number travels as ``{"__repr__", "__type__"}``, so the caller names it as it was),
``{"not_list": TYPE}``, or ``{"raised": TYPE, "text": ..., "row": i | null}`` (the batch is tried again row by row to
name the row that raises). The user's prints go to the inherited stdout / stderr (the run's log), never to OUT_FD.
"""

import importlib.util
import json
import math
import os
import resource
import sys
import types


def limit_cpu(seconds: float) -> None:
    """Allow ``seconds`` more CPU time (whole seconds, as the kernel counts) from now."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(used.ru_utime + used.ru_stime + seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))


def decode(obj: dict):
    return types.SimpleNamespace(**obj["__ns__"]) if set(obj) == {"__ns__"} else obj


def encode(value):
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e308):
        return None if value is None else float(value)
    if isinstance(value, float):  # inf, nan: the caller refuses them by value
        return value
    return {"__repr__": repr(value)[:200], "__type__": type(value).__name__}


def call(func, request: dict, cpu_s: float) -> dict:
    prompts, completions, kwargs = request["prompts"], request["completions"], request["kwargs"]
    limit_cpu(cpu_s)
    try:
        values = func(prompts=prompts, completions=completions, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the user's code: find the row that raises
        n = len(completions)
        for i in range(n):
            one = {k: ([v[i]] if isinstance(v, list) and len(v) == n else v) for k, v in kwargs.items()}
            try:
                func(prompts=[prompts[i]], completions=[completions[i]], **one)
            except Exception as row_exc:  # noqa: BLE001
                return {"raised": type(row_exc).__name__, "text": str(row_exc)[:2000], "row": i}
        return {"raised": type(exc).__name__, "text": str(exc)[:2000], "row": None}
    if not isinstance(values, (list, tuple)):
        return {"not_list": type(values).__name__}
    return {"values": [encode(v) for v in values]}


def main(argv: list[str]) -> int:
    in_fd, out_fd, path, name, cpu_s, memory_mb = int(argv[0]), int(argv[1]), argv[2], argv[3], float(argv[4]), argv[5]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if int(memory_mb) > 0:
        resource.setrlimit(resource.RLIMIT_AS, (int(memory_mb) << 20, int(memory_mb) << 20))
    reader, writer = os.fdopen(in_fd, "r", encoding="utf-8"), os.fdopen(out_fd, "w", encoding="utf-8")

    def answer(data: dict) -> None:
        writer.write(json.dumps(data) + "\n")
        writer.flush()

    limit_cpu(cpu_s)
    try:
        spec = importlib.util.spec_from_file_location(f"studio_reward_{os.path.basename(path)[:-3]}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the reward file {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - said to the caller, which names the file
        answer({"failed": f"{type(exc).__name__}: {exc}"[:2000]})
        return 1
    func = getattr(module, name, None)
    if not callable(func):
        answer({"failed": f"{path} defines no function '{name}'"})
        return 1
    answer({"ready": True})
    for line in reader:
        answer(call(func, json.loads(line, object_hook=decode), cpu_s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
