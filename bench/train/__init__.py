"""Training: the run entry point (`start.start_run`, `start.resume_run`), the one loop for
async and sync runs (`loop.train`), the learner (`learner.Learner`), what a run starts from
(`setup`), checkpoints and per-step metrics.

    run = start_run(config, out)          # run dir, env.json, the tiny base if needed
    summary = train(config, run)          # or: run, config, ckpt = resume_run(dir); train(config, run, ckpt)
"""
