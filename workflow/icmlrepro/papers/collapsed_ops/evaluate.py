"""metrics.json of the paper: per-seed values of every property, clustering, smoothing and PE result.

Each seed is one replicate: its own random complexes, geometric graphs, noise draws, community
graphs and positional-task graph. Property metrics are the worst case (min or max) or the mean over
that seed's complexes, as named; comparisons are per-seed differences, so the verdict's
interval is over paired seeds.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from .encodings import ENCODINGS
from .operators import OPERATORS, grid
from .smoothing import VARIANTS



def per_seed(df: pd.DataFrame, seeds: list[int], col: str, how: str) -> list[float]:
    out = []
    for seed in seeds:
        v = df.loc[df.seed == seed, col].astype(float)
        out.append(float(getattr(v, how)()) if v.notna().any() else float("nan"))
    return out


def property_metrics(mf: MetricsFile, props: pd.DataFrame, seeds: list[int]) -> None:
    higher = props[props.n_cells_2 > 0]
    specs = [
        ("min_eigenvalue_graded_rel", props, "graded_min_eig_rel", "min", "higher",
         "smallest eigenvalue of the graded Laplacian L* / its largest, worst complex"),
        ("min_eigenvalue_collapsed_rel", props, "collapsed_min_eig_rel", "min", "higher",
         "smallest eigenvalue of S_eps / its largest, worst complex"),
        ("min_eigenvalue_l0_minus_collapsed_rel", props, "l0_minus_collapsed_min_eig_rel", "min", "higher",
         "smallest eigenvalue of L0 - S_eps / lambda_max(L0), worst complex (Loewner bound S <= L0)"),
        ("max_rel_lambda_max_collapsed_minus_l0", props, "lambda_max_gap_rel", "max", "lower",
         "(lambda_max(S_eps) - lambda_max(L0)) / lambda_max(L0), largest over complexes"),
        ("max_asymmetry_collapsed_rel", props, "collapsed_asymmetry_rel", "max", "lower",
         "max |S - S^T| / max |S|, over complexes"),
        ("max_asymmetry_graded", props, "graded_asymmetry", "max", "lower", "max |L* - L*^T|, over complexes"),
        ("max_vertex_block_minus_l0", props, "vertex_block_minus_l0", "max", "lower",
         "max |A - L0| (the vertex block of L* is the graph Laplacian)"),
        ("max_boundary_composition", props, "boundary_composition_max", "max", "lower",
         "max |B_(k-1) B_k| over complexes (boundary of a boundary is zero)"),
        ("beyond_1hop_coupling_share_collapsed", props, "beyond_neighbour_share_collapsed", "mean", "none",
         "share of vertex pairs at distance >= 2 that S_eps couples, mean over complexes"),
        ("beyond_1hop_coupling_share_l0", props, "beyond_neighbour_share_l0", "mean", "none",
         "the same share for L0 (zero by construction)"),
        ("topology_change_rel_collapsed", higher, "topology_change_rel_collapsed", "mean", "none",
         "|S(complex) - S(1-skeleton)|_F / |S|_F, mean over complexes with triangles"),
        ("topology_change_rel_isotropic", higher, "topology_change_rel_isotropic", "max", "none",
         "the same for the isotropic ablation (no cell mass), largest over complexes"),
        ("rel_energy_complex_minus_skeleton", higher, "energy_rel_complex_minus_skeleton", "mean", "none",
         "(x'S x - x'S_1-skeleton x) / x'L0x: what adding the higher-order cells does to the energy, "
         "mean over random signals and complexes with triangles"),
        ("min_eigenvalue_complex_minus_skeleton_rel", higher, "complex_minus_skeleton_min_eig_rel", "min", "none",
         "smallest eigenvalue of S(complex) - S(1-skeleton) / lambda_max(L0), worst complex with triangles"),
        ("commutator_with_l0_rel_isotropic", props, "commutator_with_l0_rel_isotropic", "max", "none",
         "|S L0 - L0 S| / (|S| |L0|) for the isotropic ablation (0: S is a function of L0)"),
        ("commutator_with_l0_rel_collapsed", higher, "commutator_with_l0_rel_collapsed", "mean", "none",
         "the same for S with cell masses, mean over complexes with triangles"),
        ("rel_energy_skeleton_minus_l0", higher, "energy_rel_skeleton_minus_l0", "mean", "lower",
         "control arm: the same (x'S x - x'L0x) / x'L0x for S of the 1-skeleton (higher-order cells removed), "
         "same graphs and signals, mean over complexes with triangles"),
        ("rel_lambda_max_collapsed_minus_l0", higher, "lambda_max_gap_rel", "mean", "lower",
         "(lambda_max(S_eps) - lambda_max(L0)) / lambda_max(L0), mean over complexes with triangles"),
        ("rel_lambda_max_skeleton_minus_l0", higher, "lambda_max_gap_rel_skeleton", "mean", "lower",
         "control arm: the same for S of the 1-skeleton (higher-order cells removed), same complexes"),
        ("beyond_1hop_coupling_share_skeleton", higher, "beyond_neighbour_share_skeleton", "mean", "none",
         "control arm: share of distance >= 2 pairs coupled by S of the 1-skeleton, complexes with triangles"),
        ("far_coupling_mass_collapsed", higher, "far_coupling_mass_collapsed", "mean", "higher",
         "share of S_eps's off-diagonal mass sum|S_ij| on pairs at distance >= 2, mean over complexes with "
         "triangles"),
        ("far_coupling_mass_skeleton", higher, "far_coupling_mass_skeleton", "mean", "higher",
         "control arm: the same share for S of the 1-skeleton (higher-order cells removed), same complexes"),
        ("rel_energy_collapsed_minus_l0", higher, "energy_rel_collapsed_minus_l0", "mean", "lower",
         "mean over random signals of (x'Sx - x'L0x) / x'L0x, mean over complexes with triangles (matrix-free)"),
        ("max_rel_energy_collapsed_minus_l0", props, "energy_max_rel_collapsed_minus_l0", "max", "lower",
         "largest (x'Sx - x'L0x) / x'L0x over random signals and complexes (matrix-free)"),
        ("matfree_vs_dense_rel_error", props, "matfree_vs_dense_rel", "max", "lower",
         "largest relative difference of the CG product S_eps x from the dense one"),
        ("cg_iterations_per_product", props, "cg_iterations_per_product", "mean", "lower",
         "inner CG iterations per matrix-free product, mean over complexes"),
    ]
    for name, df, col, how, direction, desc in specs:
        mf.add(name, per_seed(df, seeds, col, how), unit="ratio", direction=direction, description=desc)
    diff = props.assign(d=props.beyond_neighbour_share_collapsed - props.beyond_neighbour_share_l0)
    mf.add("beyond_1hop_coupling_share_collapsed_minus_l0", per_seed(diff, seeds, "d", "mean"),
           unit="fraction", direction="higher", description="share of distance >= 2 pairs coupled: S minus L0")
    mf.add("n_complexes", per_seed(props.assign(one=1.0), seeds, "one", "sum"), unit="count",
           description="complexes checked per seed (random families and real graphs)")


def clustering_metrics(mf: MetricsFile, clus: pd.DataFrame, seeds: list[int]) -> None:
    for split, tag in (("test", "blocks"), ("real", "karate")):
        sub = clus[clus.split == split]
        vals = {}
        for op in OPERATORS:
            d = sub[sub.operator == op]
            vals[op] = np.array(per_seed(d, seeds, "ari", "mean"))
            mf.add(f"ari.{op}.{tag}", vals[op], unit="ARI", direction="higher",
                   description=f"adjusted Rand index of spectral clustering with {op} ({tag})")
            mf.add(f"nmi.{op}.{tag}", per_seed(d, seeds, "nmi", "mean"), unit="NMI", direction="higher",
                   description=f"normalised mutual information, spectral clustering with {op} ({tag})")
        suffix = "" if tag == "blocks" else ".karate"
        bases = ["l0", "mult", "isotropic"]
        if tag == "blocks":  # the untuned L0 (r = 0), beside L0 tuned on the same grid size as S
            vals["l0_untuned"] = np.array(per_seed(sub[sub.operator == "l0_untuned"], seeds, "ari", "mean"))
            mf.add("ari.l0_untuned.blocks", vals["l0_untuned"], unit="ARI", direction="higher",
                   description="adjusted Rand index of spectral clustering with the untuned L0 (r = 0) (blocks)")
            bases.append("l0_untuned")
        for base in bases:
            mf.add(f"ari_collapsed_minus_{base}{suffix}", vals["collapsed"] - vals[base], unit="ARI",
                   direction="higher", description=f"ARI with S_eps minus with {base} ({tag})")


def weight_at_grid_edge(op: str, value: float, values: list[float]) -> bool:
    """Whether a validation-chosen operator weight sits at an end of its tuning grid that could be widened: L0's
    r = 0 (no regulariser) ends r's domain, so only its top counts there."""
    return float(value) == max(values) if op == "l0" else at_grid_edge(value, values)


def smoothing_metrics(mf: MetricsFile, sm: pd.DataFrame, seeds: list[int], p) -> None:
    for variant in VARIANTS:
        sub = sm[sm.variant == variant]
        for op in OPERATORS:
            picks = per_seed(sub[sub.operator == op], seeds, "param", "mean")
            mf.add(f"smoothing_at_grid_edge.{op}@{variant}",
                   [float(weight_at_grid_edge(op, v, grid(p, op))) for v in picks], unit="flag", direction="none",
                   description=f"1 if {op}'s validation-chosen weight ({variant}) is an end of its grid {grid(p, op)}")
        vals = {op: np.array(per_seed(sub[sub.operator == op], seeds, "test_mse", "mean"))
                for op in (*OPERATORS, "l0_untuned", "noisy_input")}
        for op, v in vals.items():
            mf.add(f"smoothing_mse.{op}@{variant}", v, unit="MSE", direction="lower",
                   description=f"test reconstruction MSE of Tikhonov smoothing with {op} ({variant})")
        for base in ("l0", "l0_untuned", "mult", "isotropic"):
            mf.add(f"smoothing_mse_{base}_minus_collapsed@{variant}", vals[base] - vals["collapsed"], unit="MSE",
                   direction="higher", description=f"test MSE with {base} minus with S_eps ({variant})")
    mf.add("smoothing_cg_vs_dense_max", per_seed(sm, seeds, "cg_vs_dense_max", "max"), unit="signal units",
           direction="lower", description="largest |x_CG - x_dense| of the test estimates (matrix-free vs dense)")


def encoding_metrics(mf: MetricsFile, res: pd.DataFrame, seeds: list[int]) -> None:
    """The PE stage's metrics over its own seeds (encodings.n_seeds: cheap, so sized by its claim's n*)."""
    acc = {e: np.array(per_seed(res[res.encoding == e], seeds, "test_acc", "mean")) for e in ENCODINGS}
    add = functools.partial(mf.add, replicates=list(seeds))
    for e in ENCODINGS:
        d = res[res.encoding == e]
        add(f"test_acc.{e}", acc[e], unit="accuracy", direction="higher",
            description=f"GCN test accuracy on the distance-from-centre classes with {e} (weight decay and "
                        "checkpoint chosen on validation accuracy)")
        add(f"test_acc_untuned.{e}", per_seed(d, seeds, "untuned_test_acc", "mean"), unit="accuracy",
            direction="higher", description=f"the same with {e} at the default weight decay (untuned)")
        add(f"weight_decay.{e}", per_seed(d, seeds, "weight_decay", "mean"), unit="weight decay",
            description=f"validation-chosen weight decay with {e}")
        add(f"tuned_interior.{e}", per_seed(d, seeds, "interior", "mean"), unit="flag",
            description=f"1 = the weight decay chosen for {e} is interior to its grid")
        add(f"tuning_tie.{e}", per_seed(d, seeds, "tie", "mean"), unit="flag",
            description=f"1 = the default weight decay won for {e} by the tie rule (within one validation SE)")
        add(f"train_seconds.{e}", per_seed(d, seeds, "seconds", "sum"), unit="s", direction="lower",
            timing=True, description=f"wall time of encoding + training with {e}")
    for base in ("nope", "laplacepe"):
        add(f"acc_schurpe_minus_{base}", acc["schurpe"] - acc[base], unit="accuracy", direction="higher",
            description=f"test accuracy with SchurPE minus with {base}")


def run(job) -> None:
    p = job.params
    seeds = [int(s) for s in p["seeds"]]
    mf = MetricsFile("collapsed_ops", p["scale"], replicate="seed", replicates=seeds)
    property_metrics(mf, read_parquet(job.input.properties), seeds)
    clustering_metrics(mf, read_parquet(job.input.clustering), seeds)
    smoothing_metrics(mf, read_parquet(job.input.smoothing), seeds, p)
    results = pd.concat([read_parquet(job.input[f"results_{e}"]) for e in ENCODINGS], ignore_index=True)
    encoding_metrics(mf, results, [int(s) for s in p["encodings"]["seeds"]])
    mf.write(job.output.metrics)
