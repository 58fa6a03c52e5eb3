"""The page template of `dvc plots show` that draws its plots offline (`study plots-template`;
`make plots`). DVC's own page loads vega, vega-lite and vega-embed from a CDN when it is opened, so
without a network its three interactive plots are blank. This template holds the three libraries
inline, taken from the copies the installed Snakemake ships for its own report (vega-lite version
5.2, so workflow/plots/*.json use nothing newer), and leaves out DVC's `{scripts}` placeholder,
so that DVC adds no CDN script tag: the page it writes needs nothing from the network."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: the libraries, in load order (vega-lite and vega-embed need vega), as Snakemake's assets name them
LIBRARIES = ("vega/vega.js", "vega-lite/vega-lite.js", "vega-embed/vega-embed.js")
#: where dvc_render puts the plots; `{scripts}` (its CDN tags) is deliberately absent
PLOTS_PLACEHOLDER = "{plot_divs}"


def library_sources() -> dict[str, str]:
    """Each library's JavaScript, read from the installed Snakemake's assets."""
    try:
        data = resources.files("snakemake.assets") / "data"
    except ModuleNotFoundError:
        raise FileNotFoundError("the vega libraries come from Snakemake's assets, and snakemake is not installed: "
                                "pip install -e '.[workflow]'") from None
    sources = {}
    for name in LIBRARIES:
        path = data / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing from the installed Snakemake: reinstall it "
                                    "(pip install -e '.[workflow]')")
        text = path.read_text(encoding="utf-8")
        if "</script" in text.lower():  # would end the inline script early
            raise ValueError(f"{path} holds '</script': it cannot be inlined in a page")
        sources[name] = text
    return sources


def plots_template() -> str:
    """The page: the libraries inline, then DVC's plots."""
    scripts = "\n".join(f'<script type="text/javascript">/* {name} (from snakemake.assets) */\n{text}\n</script>'
                        for name, text in library_sources().items())
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>DVC plots (offline)</title>\n"
            f"{scripts}\n<style>table {{ border-spacing: 15px; }}</style>\n</head>\n<body>\n"
            f"{PLOTS_PLACEHOLDER}\n</body>\n</html>\n")


def write_plots_template(out: str | Path) -> Path:
    """Write the template (the folder made where missing)."""
    from study.io import atomic_write_text

    atomic_write_text(out, plots_template())
    return Path(out)
