"""The evaluation pipeline: plan (evaluate), run (jobs, parallel), store records (store),
aggregate and tabulate them, and the set-up checks (doctor). Data flows one way:
suite -> samples -> runner -> records -> aggregates -> reports."""
