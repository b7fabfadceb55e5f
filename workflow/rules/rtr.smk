# RTR: 60 Hz action chunking in a VAE latent space, Reuse-then-Refine (resources/claims/rtr.yaml).
# rtr_data (per seed) -> rtr_vae (per seed) -> rtr_train (policy x seed) -> rtr_eval (closed-loop MuJoCo rollouts)
# -> rtr_figures. Every seed draws its own demonstrations; seed k's VAE, policies and evaluation read seed k's data.
from icmlrepro.papers.rtr.workflow_inputs import rtr_policy_files


rule rtr_data:
    output:
        steps="results/{scale}/rtr/data/seed{seed}/steps.parquet",
        episodes="results/{scale}/rtr/data/seed{seed}/episodes.parquet",
        summary="results/{scale}/rtr/data/seed{seed}/summary.json",
    params:
        stage="rtr.data",
        spec=paths_spec,
        settings=settings_of("rtr", "n_train_demos", "n_test_demos", "demo_ticks"),
    log:
        "results/{scale}/rtr/logs/rtr_data/seed{seed}.log",
    benchmark:
        "results/{scale}/rtr/benchmarks/rtr_data/seed{seed}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=lambda wildcards, attempt: (10 if wildcards.scale != "paper" else 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rtr_vae:
    input:
        steps=rules.rtr_data.output.steps,
        episodes=rules.rtr_data.output.episodes,
    output:
        vae="results/{scale}/rtr/vae/seed{seed}/vae.pt",
    params:
        stage="rtr.vae",
        spec=paths_spec,
        settings=settings_of("rtr", "idle_margin", "horizon", "block", "downsample", "ablation_downsample", "latent_channels",
                             "vae_hidden", "vae_steps", "vae_batch", "vae_lr", "beta"),
    log:
        "results/{scale}/rtr/logs/rtr_vae/seed{seed}.log",
    benchmark:
        "results/{scale}/rtr/benchmarks/rtr_vae/seed{seed}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rtr_train:
    input:
        steps=rules.rtr_data.output.steps,
        episodes=rules.rtr_data.output.episodes,
        vae=rules.rtr_vae.output.vae,
    output:
        policy="results/{scale}/rtr/train/{policy}/seed{seed}/policy.pt",
    params:
        stage="rtr.train",
        spec=paths_spec,
        settings=settings_of("rtr", "idle_margin", "horizon", "block", "downsample", "latent_channels", "vae_hidden",
                             "hidden", "layers", "steps", "batch", "lr", "train_timesteps", "prediction"),
    log:
        "results/{scale}/rtr/logs/rtr_train/{policy}-seed{seed}.log",
    benchmark:
        "results/{scale}/rtr/benchmarks/rtr_train/{policy}-seed{seed}.tsv"
    wildcard_constraints:
        policy="action60|action15|latent",
        seed=r"\d+",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rtr_eval:
    input:
        unpack(lambda wildcards: rtr_policy_files(paper_settings(config, "rtr", wildcards.scale))),
    output:
        metrics="results/{scale}/rtr/metrics.json",
        offline="results/{scale}/rtr/eval/offline.parquet",
        closed="results/{scale}/rtr/eval/closed_loop.parquet",
        traces="results/{scale}/rtr/eval/traces.parquet",
    params:
        stage="rtr.evaluate",
        spec=paths_spec,
        settings=settings_of("rtr"),
    log:
        "results/{scale}/rtr/logs/rtr_eval.log",
    benchmark:
        "results/{scale}/rtr/benchmarks/rtr_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (3000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 12 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rtr_figures:
    input:
        closed=rules.rtr_eval.output.closed,
        offline=rules.rtr_eval.output.offline,
        traces=rules.rtr_eval.output.traces,
    output:
        trajectories=report("results/{scale}/rtr/figures/trajectories.png", caption="../../report/captions/rtr.rst", category="rtr"),
        continuity=report("results/{scale}/rtr/figures/chunk_continuity.png", caption="../../report/captions/rtr.rst", category="rtr"),
        success=report("results/{scale}/rtr/figures/success_pauses.png", caption="../../report/captions/rtr.rst", category="rtr"),
        offline=report("results/{scale}/rtr/figures/offline_chunks.png", caption="../../report/captions/rtr.rst", category="rtr"),
    params:
        stage="rtr.figures",
        spec=paths_spec,
        settings=settings_of("rtr", "delay"),
    log:
        "results/{scale}/rtr/logs/rtr_figures.log",
    benchmark:
        "results/{scale}/rtr/benchmarks/rtr_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["rtr"] = {
    "metrics": rules.rtr_eval.output.metrics,
    "figures": list(rules.rtr_figures.output),
}
