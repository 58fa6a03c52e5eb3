"""Pinned SHA-256 of zoo weights files, and the check every zoo file passes before it is used.

robustbench publishes no checksums of its weights; the project pins its own in
`zoo_weights.sha256` beside this module (its header says where each line comes from), and a
site may pin its copies in a file of the same format named by $STUDY_ZOO_CHECKSUMS. The rule:
a pinned file whose hash differs is refused; an unpinned one is used and marked (the caller
prints the warning and records the hash). Every file is also read once with
torch.load(weights_only=True): one that torch refuses so is refused here, with where a good
copy comes from, never with a way around weights_only (such a file may run code when unpickled).
"""

from __future__ import annotations

import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

PROJECT_TABLE = Path(__file__).with_name("zoo_weights.sha256")
SITE_TABLE_ENV = "STUDY_ZOO_CHECKSUMS"
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](\S.*)$")


UNREADABLE = (pickle.UnpicklingError, RuntimeError, EOFError)  # torch.load's errors on a bad file


class ZooWeightsRefused(ValueError):
    """A zoo weights file that must not be used: a pinned hash differs, or torch's safe loader refuses it."""


@dataclass(frozen=True)
class CheckedFile:
    relative: str  # its place in the weights folder
    sha256: str
    pinned: bool


def read_table(path: Path) -> dict[str, str]:
    """place -> sha256 of a `sha256sum`-format table; a malformed line is one error naming it."""
    table: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if not match:
            raise ValueError(f"{path}:{number}: not a checksum line ({line.strip()[:80]!r}); valid: "
                             "<64 lowercase hex digits><two spaces><place in the weights folder>")
        table[match.group(2)] = match.group(1)
    return table


def pinned_checksums() -> dict[str, str]:
    """The project's pins, then the site's ($STUDY_ZOO_CHECKSUMS), which may add places but not change one."""
    table = read_table(PROJECT_TABLE)
    site = os.environ.get(SITE_TABLE_ENV, "").strip()
    if site:
        if not Path(site).is_file():
            raise ValueError(f"${SITE_TABLE_ENV}={site}: no such file; valid: a checksum table in sha256sum's format")
        for place, digest in read_table(Path(site)).items():
            if table.get(place, digest) != digest:
                raise ValueError(f"${SITE_TABLE_ENV}={site} pins {place} to {digest}, but the project pins "
                                 f"{table[place]} ({PROJECT_TABLE})")
            table[place] = digest
    return table


def unpickling_refusal(err: Exception) -> str:
    """The part of torch's weights_only refusal that says what the file holds (its first lines
    describe how to load the file unsafely, which this project never does)."""
    text = str(err)
    reason = text.split("WeightsUnpickler error:", 1)[-1].strip() if "WeightsUnpickler error:" in text else text
    return " ".join(reason.split(". ")[0].split())[:200]


def unsafe_file_error(path: Path, who: str, good_copy: str, err: Exception) -> ZooWeightsRefused:
    what = ("torch's safe loader (weights_only) refuses it: " + unpickling_refusal(err)
            if isinstance(err, pickle.UnpicklingError) else f"torch cannot read it: {unpickling_refusal(err)}")
    return ZooWeightsRefused(f"weights of {who}: {path} is not a plain weights file ({what}); it was not "
                             f"loaded: delete it and fetch a good copy ({good_copy})")


def check_file(path: Path, relative: str, pins: dict[str, str], who: str, good_copy: str,
               read: bool = True) -> CheckedFile:
    """`path` (at `relative` in the folder) checked against its pin and (`read`) read with
    weights_only; ZooWeightsRefused names the file, why, and where a good copy comes from."""
    from study.data.download import file_checksums
    from study.io import load_torch

    digest = file_checksums(path, ["sha256"])["sha256"]
    pinned = pins.get(relative)
    if pinned is not None and pinned != digest:
        raise ZooWeightsRefused(f"weights of {who}: {path} has sha256 {digest}, but {relative} is pinned to {pinned}; "
                                f"the file was not used: delete it and fetch a good copy ({good_copy})")
    try:
        if read:
            load_torch(path)
    except UNREADABLE as err:
        raise unsafe_file_error(path, who, good_copy, err) from None
    return CheckedFile(relative, digest, pinned is not None)
