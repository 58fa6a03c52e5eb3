"""The reproduction report (results/<preset>/reproduction.md): our numbers beside the published ones
(study.published, listed with their sources in docs/study.md#published-numbers), one row per
published value and run group of ours, each with the paper, table or figure and row it comes
from, the differences between the published recipe and ours, and the checks applied.

One module per job:

- `matching`: which run groups of the class-wise table stand for a published row, and how
  their recipe departs from the published one (and whether it is a reduced-scale recipe);
- `statistics`: estimates over seeds, differences between methods, Spearman's rho of a ranking;
- `comparison`: the report's rows (`compare`), each a published value beside one run group;
- `render`: the rows as markdown;
- `report`: the report of a tables folder, written to results/<preset>/reproduction.md (`study reproduction`).
"""

from study.reproduction.comparison import Row, compare
from study.reproduction.report import reproduction_markdown, reproduction_report

__all__ = ["Row", "compare", "reproduction_markdown", "reproduction_report"]
