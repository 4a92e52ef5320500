"""Studio's engine: the run spec, launcher, run registry, planner and (in subprocesses) the trainer.

Light modules (spec, events, launch, runs, plan, hardware, workspace, registry, cli) never import torch;
heavy ones (train, data, model, callbacks, merge) run inside the trainer or worker subprocesses.
"""
