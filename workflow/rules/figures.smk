# Phase 4: figures. One rule per figure of the catalog (study.figures.catalog.FIGURES), one job per panel,
# each running the figure's `study` command; and the manifest results/<preset>/figures/all that
# stands for the whole set, which also copies every PNG into results/<preset>/figure_images (DVC's
# plots); and results/figures/all, the manifest of the preset selected (the user's target).

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
            f"{PRESET_RESULTS}/logs/figures/{{fig}}/{_spec.stem}.log",
        benchmark:
            f"{PRESET_RESULTS}/benchmarks/figures/{{fig}}/{_spec.stem}.tsv",
        params:
            args=figure_args,
        conda:
            "../../environment.yml"
        shell:
            "study {params.args} 2> {log:q}"


_FIGURE_FILES = [file for fig in PARAMS.figures for file in figure_files(fig)]


rule figures_all:
    input:
        files=_FIGURE_FILES,
        stamp=gathered("figures_all", _FIGURE_FILES, [f"{FIGURES_DIR}/all", *figure_images().values()]),
    output:
        manifest=f"{FIGURES_DIR}/all",
        # each PNG again, where DVC declares the image plots: a copy, not a hard link, since Snakemake
        # touches a finished job's outputs, and a touched link would make the figures newer than the manifest
        images=list(figure_images().values()),
    log:
        f"{PRESET_RESULTS}/logs/figures/manifest.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/figures/manifest.tsv",
    params:
        copies=" && ".join(f"cp {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in figure_images().items()) or "true",
    conda:
        "../../environment.yml"
    shell:
        "study manifest --out {output.manifest:q} {input.files:q} 2> {log:q}"
        " && {params.copies} && echo copied {output.images:q} >> {log:q}"


# The user's targets, `results/figures/all` and `results/reproduction.md`: the preset selected's
# manifest and reproduction report, copied under a line that names the preset. The preset is a
# param, so a run with another preset makes them again (and, through their inputs, that preset's
# figures and report), however old or new the files of the other presets are.
rule selected_figures:
    input:
        f"{FIGURES_DIR}/all",
    output:
        SELECTED_FIGURES,
    log:
        f"{PRESET_RESULTS}/logs/selected_figures.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/selected_figures.tsv",
    params:
        preset=PARAMS.preset,
    localrule: True
    conda:
        "../../environment.yml"
    shell:
        "(echo '# the figures of preset '{params.preset:q}' ('{input:q}')' && cat {input:q}) > {output:q}"
        " && echo copied {input:q} to {output:q} > {log:q}"


rule selected_reproduction:
    input:
        f"{REPRODUCTION}.md",
    output:
        SELECTED_REPRODUCTION,
    log:
        f"{PRESET_RESULTS}/logs/selected_reproduction.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/selected_reproduction.tsv",
    params:
        preset=PARAMS.preset,
    localrule: True
    conda:
        "../../environment.yml"
    shell:
        "(echo '<!-- the reproduction report of preset '{params.preset:q}': '{input:q}' -->' && cat {input:q})"
        " > {output:q} && echo copied {input:q} to {output:q} > {log:q}"
