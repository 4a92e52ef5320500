"""Studio's engine: a package per part (docs/ARCHITECTURE.md lists every module in one line).

Every package but ``trainer`` is light: it never imports torch or transformers, so the page and the ``studio``
command start fast (``tests/test_architecture.py`` holds that). ``engine.trainer`` is the heavy part: the trainer,
merge, export, evaluation, serving and chat processes, always run as subprocesses started with an argv list.
"""
