# Phase 4: figures. One rule per figure of the catalog (study.figures.catalog.FIGURES), one job per panel,
# each running the figure's `study` command; and the manifest results/figures/all that
# stands for the whole set, which also copies every PNG into results/figure_images (DVC's plots).

for _fig, _spec in FIGURES.items():

    rule:
        name:
            _fig
        input:
            unpack(figure_inputs),
        output:
            **figure_outputs(_fig),
        wildcard_constraints:
            fig=_fig,
        log:
            f"{RESULTS}/logs/figures/{{fig}}/{_spec.stem}.log",
        benchmark:
            f"{RESULTS}/benchmarks/figures/{{fig}}/{_spec.stem}.tsv",
        params:
            args=figure_args,
        conda:
            "../../environment.yml"
        shell:
            "study {params.args} 2> {log:q}"


_FIGURE_FILES = [file for fig in config["figures"] for file in figure_files(fig)]


rule figures_all:
    input:
        files=_FIGURE_FILES,
        stamp=gathered("figures_all", _FIGURE_FILES, [f"{RESULTS}/figures/all", *figure_images().values()]),
    output:
        manifest=f"{RESULTS}/figures/all",
        # each PNG again, where DVC declares the image plots: a copy, not a hard link, since Snakemake
        # touches a finished job's outputs, and a touched link would make the figures newer than the manifest
        images=list(figure_images().values()),
    log:
        f"{RESULTS}/logs/figures/manifest.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/manifest.tsv",
    params:
        copies=" && ".join(f"cp {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in figure_images().items()) or "true",
    conda:
        "../../environment.yml"
    shell:
        "study manifest --out {output.manifest:q} {input.files:q} 2> {log:q}"
        " && {params.copies} && echo copied {output.images:q} >> {log:q}"
