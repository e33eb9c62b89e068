"""Training: the run entry point (`start.start_run`, `start.resume_run`), the one loop for
async and sync runs (`loop.train`), the learner (`learner.Learner`), what a run starts from
(`setup`), checkpoints and per-step metrics.

    parts = build_run(layer, ...)         # bench.config: the config, its algorithm and task, built once
    run = start_run(parts, out)           # run dir, env.json, the tiny base if needed
    summary = train(parts, run)           # or: run, parts, ckpt = resume_run(dir); train(parts, run, ckpt)
"""
