"""What only the studies use (examples/wmt17, examples/gile): running and logging their fairseq commands
(:mod:`.study_runs`), reading fairseq's logs (:mod:`.fairseq_log`), tables and seed aggregates (:mod:`.study_reports`)
and the study-only metrics (:mod:`.study_metrics`). Installed beside ``fairseq_joint`` by this repository's setup.py
(``make install``), never imported by it."""
