"""search layer: one reward search as a run, from its options to its outcome, and sweeps of runs over Ray Tune.

Import from the submodules; this file stays empty so importing the package costs nothing (the engine, the LLM and
the graph load only when a run starts). The entry points the CLI uses:

- ``config.SearchConfig`` (every option of a run, checked once), ``presets.preset_config`` (the demo and paper
  presets), ``option_checks`` (what `lares run` refuses before a run folder is made);
- ``runner.start_run`` / ``runner.resume_run`` / ``runner.check_start`` (a run from its config, or from its folder),
  ``outcome.RunOutcome`` (what a finished run says);
- ``sweep_spec.SweepSpec`` and ``sweep.start_sweep`` / ``sweep.resume_sweep`` (a grid of runs as Ray Tune trials);
- ``found_reward`` (a reward a run found, read back for retraining or export).
"""
