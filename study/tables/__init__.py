"""The study's tables (results/<preset>/tables/), aggregated from the per-sample and per-epoch records
of many runs, never from models: class-wise accuracy, its summaries, seed aggregates, the
headline metrics and the zoo's comparison with RobustBench (classwise.py); FRL, CFP,
confusion, attack, check and corruption tables (robustness.py)."""
