"""The evaluation pipeline: the flags (eval_config), planning (planning, sample_plan, run_settings),
running (evaluate, engine, jobs, parallel), the records store (store, record_checks), aggregation
(aggregate and its blocks; reaggregate from a store), results.json (results), the terminal table and
the set-up checks (doctor). Data flows one way: suite -> samples -> runner -> records -> aggregates
-> reports."""
