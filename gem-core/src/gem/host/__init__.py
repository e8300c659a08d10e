"""The env host: the one layer that runs an env's calls wherever the env lives (the caller's
thread, a thread pool, a worker process, a Ray actor) and owns what can go wrong there.

- :mod:`gem.host.failures`: a failure in a form that crosses processes, and the three names
  every backend reports: ``StepTimeout`` (a call overran its deadline), ``WorkerDied`` (the
  process or actor running it died and was restarted) and ``EpisodeLost`` (an env that did
  nothing wrong lost its episode with a sibling's worker).
- :mod:`gem.host.calls`: executing one call on a :class:`~gem.host.slot.Slot`, in place or
  in a worker, with the snapshot a worker sends back, and the replay that restores one.
- :mod:`gem.host.deadlines`: the step-timeout clocks of the calls or workers in flight, and
  the one wait loop (:func:`~gem.host.deadlines.collect`) of the transports whose workers run
  their calls in order (the vector process backend, Ray).
- :mod:`gem.host.recovery`: restarts and lost-episode reports: after a worker dies or hangs,
  the call it ran fails, its other envs go on from their snapshots, and an env that cannot
  says so on its next call.
- :mod:`gem.host.hosted`: :class:`~gem.host.hosted.HostedEnv`, one env in a thread, a worker
  process or a Ray actor (a one-env vector backend), whose failing step ends its episode
  truncated with ``info["failure"]`` instead of raising: what the framework adapters and
  ``gem serve`` step through.
- :mod:`gem.host.threads`: the envs of an async run in its thread pool: a call past the step
  timeout fails, and its env, which a thread may still be inside, is never reused.
- :mod:`gem.host.worker`: the one worker process lifecycle (start, calls and answers, kill,
  restart through :meth:`~gem.host.recovery.Recovery.rerun`, the one culprit rerun, which the
  Ray backend's actors use too), running its calls one at a time (the vector process backend)
  or side by side (:mod:`gem.host.processes`: the envs of a run with ``processes=N``).

The vector backends (:mod:`gem.vector`), the runner (:mod:`gem.runner`, its worker
processes in :mod:`gem.host.processes`) and the multi-agent runner
(:mod:`gem.multiagent.runner`) are built on it; ``gem-core/tests/test_faults.py`` runs
each fault against each of them.
"""
