"""A training process that stops at a known point, for the killed-process test
(tests/integration/test_engine.py): `train_run` as `study train` runs it (its data file, run
config, CPU, one thread), with an `on_checkpoint` callback that, after the first checkpoint,
creates `<release>.reached` and waits until `<release>` exists. The test kills it there instead
of racing a fast machine to that point; the production command has no such pause.

    python tests/helpers/paused_train.py DATA RUN_DIR RUN_CONFIG_JSON RELEASE
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def pause_once(release: Path):
    """The callback: the first checkpoint announces itself and waits for `release`."""
    paused = False

    def on_checkpoint(epoch: int) -> None:
        nonlocal paused
        if paused:
            return
        paused = True
        Path(f"{release}.reached").touch()
        while not release.exists():
            time.sleep(0.05)

    return on_checkpoint


def main(argv: list[str]) -> int:
    from study.data.prepared import load_prepared
    from study.device import set_threads
    from study.train.engine import train_run

    data, run_dir, run_config, release = argv
    set_threads(1)
    cfg = json.loads(Path(run_config).read_text())
    train_run(cfg, load_prepared(data), run_dir, device="cpu", progress=False, on_checkpoint=pause_once(Path(release)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
