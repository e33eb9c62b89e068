"""The rollout side: an engine thread, episodes, and the producer that keeps the engine busy.

Threads: the *engine worker* (`worker.EngineWorker`) steps the engine (continuous batching)
and hands finished completions back; the *producer* (`producer.RolloutProducer`) runs an
asyncio loop in which each episode (`episode.run_episode`) is a coroutine, so env calls such as
tool latency overlap freely; the learner (main thread) takes finished groups from
`RolloutProducer.groups` and tells the producer how much more it may launch. Evaluation plays
its samples through the same `run_episode`.
"""
