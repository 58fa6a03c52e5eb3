"""Rank agreement of class accuracies between models and settings (docs/study.md#figures, 8): are the
same classes weak everywhere?"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

METHODS = ("spearman", "kendall")


def class_accuracy_matrix(classwise: pd.DataFrame, config: Sequence[str]) -> pd.DataFrame:
    """Classes x configurations: the accuracy of each class, averaged over seeds.

    A configuration is one combination of the `config` columns (e.g. model, method, eval);
    its column label joins their values with ' | '. Rows follow the class index.
    """
    config = list(config)
    missing = [c for c in [*config, "class", "class_name", "acc"] if c not in classwise.columns]
    if missing:
        raise ValueError(f"class-wise table lacks column(s) {missing}; it has {list(classwise.columns)}")
    table = classwise.assign(config=classwise[config].astype(str).agg(" | ".join, axis=1))
    wide = table.pivot_table(index="class", columns="config", values="acc", aggfunc="mean", sort=False)
    names = table.drop_duplicates("class").set_index("class")["class_name"]
    wide = wide.sort_index()
    wide.index = names.reindex(wide.index).astype(str).to_numpy()
    wide.index.name = "class_name"
    wide.columns.name = None
    return wide[list(dict.fromkeys(table["config"]))]


def rank_agreement(wide: pd.DataFrame, method: str = "spearman") -> pd.DataFrame:
    """Pairwise rank correlation of the columns of `wide` (classes x configurations).

    spearman: Spearman's rho; kendall: Kendall's tau-b (ties counted as in scipy). Classes
    missing in either column are left out of that pair; a constant column gives NaN.
    """
    from scipy import stats

    if method not in METHODS:
        raise ValueError(f"unknown rank correlation {method!r}; valid: {', '.join(METHODS)}")
    cols = list(wide.columns)
    out = pd.DataFrame(np.nan, index=cols, columns=cols, dtype=float)
    for i, a in enumerate(cols):
        for b in cols[i:]:
            pair = wide[[a, b]].dropna() if a != b else wide[[a]].dropna()
            x = pair.iloc[:, 0].to_numpy(float)
            y = pair.iloc[:, -1].to_numpy(float)
            if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
                value = np.nan
            elif method == "spearman":
                value = float(stats.spearmanr(x, y).statistic)
            else:
                value = float(stats.kendalltau(x, y).statistic)
            out.loc[a, b] = out.loc[b, a] = value
    return out
