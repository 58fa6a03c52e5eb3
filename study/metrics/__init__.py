"""Class-wise accuracy, its confidence intervals and discrepancy summaries (study.metrics.classwise,
study.metrics.intervals); the explanations of figures 4-6 and 8-10 (study.metrics.discrepancy_intervals,
study.metrics.rank, study.metrics.confusion); an epoch's selection index and the epochs a checkpoint may be
chosen from (study.metrics.epoch_selection). Import from the modules: the package imports none of them, so
the configuration, which reads the last, loads no pandas."""
