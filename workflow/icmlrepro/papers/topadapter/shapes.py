"""Procedural mesh families (trimesh primitives and their compositions) and the corruptions of the hard split.

Two disjoint class sets: the pretraining domain (primitive solids) and the downstream domain (other classes,
several of which differ from a pretraining class mainly in local surface structure: an ellipsoid vs a faceted
icosahedron, a flat annulus vs a torus), so that local geometry is what the downstream task needs. Every
sample has random anisotropic size and a random pose; the downstream domain is also corrupted like
ScanObjectNN's hard split: a partial view (one side cut away), background clutter (a floor patch) and jitter.
"""

from __future__ import annotations

import numpy as np
import trimesh
from trimesh import creation

PRETRAIN_CLASSES = ("sphere", "box", "cylinder", "cone", "torus", "capsule")
DOWNSTREAM_CLASSES = ("ellipsoid", "icosahedron", "annulus", "dumbbell", "table", "mushroom", "mug", "cross")


def _moved(mesh: trimesh.Trimesh, xyz) -> trimesh.Trimesh:
    mesh.apply_translation(np.asarray(xyz, float))
    return mesh


def build_mesh(name: str, rng: np.random.Generator) -> trimesh.Trimesh:
    """One random instance of a class (before pose and size jitter)."""
    u = lambda a, b: float(rng.uniform(a, b))  # noqa: E731
    if name in ("sphere", "ellipsoid"):
        m = creation.icosphere(subdivisions=3)
        return m.apply_scale([1.0, u(0.45, 0.7), u(0.45, 0.7)]) if name == "ellipsoid" else m
    if name == "icosahedron":
        return creation.icosahedron()
    if name == "box":
        return creation.box(extents=[1.0, u(0.5, 1.0), u(0.5, 1.0)])
    if name == "cylinder":
        return creation.cylinder(radius=u(0.3, 0.5), height=u(0.8, 1.6), sections=32)
    if name == "cone":
        return creation.cone(radius=u(0.4, 0.6), height=u(0.8, 1.4), sections=32)
    if name == "torus":
        return creation.torus(major_radius=1.0, minor_radius=u(0.2, 0.4), major_sections=32, minor_sections=16)
    if name == "annulus":
        return creation.annulus(r_min=u(0.5, 0.7), r_max=1.0, height=u(0.15, 0.3), sections=32)
    if name == "capsule":
        return creation.capsule(height=u(0.6, 1.2), radius=u(0.3, 0.45), count=[16, 16])
    if name == "dumbbell":
        r, h = u(0.3, 0.45), u(1.2, 1.8)
        return trimesh.util.concatenate([_moved(creation.icosphere(2, radius=r), [0, 0, -h / 2]),
                                         _moved(creation.icosphere(2, radius=r), [0, 0, h / 2]),
                                         creation.cylinder(radius=r / 3, height=h, sections=16)])
    if name == "table":
        w, d, t, leg = u(1.2, 1.8), u(0.8, 1.2), u(0.06, 0.12), u(0.6, 1.0)
        legs = [_moved(creation.cylinder(radius=0.05, height=leg, sections=12), [sx * w * 0.42, sy * d * 0.42, -leg / 2])
                for sx in (-1, 1) for sy in (-1, 1)]
        return trimesh.util.concatenate([_moved(creation.box(extents=[w, d, t]), [0, 0, t / 2]), *legs])
    if name == "mushroom":
        stem = u(0.5, 0.9)
        return trimesh.util.concatenate([_moved(creation.cone(radius=u(0.6, 0.9), height=u(0.3, 0.5), sections=32), [0, 0, stem]),
                                         _moved(creation.cylinder(radius=u(0.1, 0.18), height=stem, sections=16), [0, 0, stem / 2])])
    if name == "mug":
        r, h = u(0.35, 0.5), u(0.8, 1.2)
        handle = creation.torus(major_radius=h * 0.25, minor_radius=0.05, major_sections=24, minor_sections=8)
        handle.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
        return trimesh.util.concatenate([creation.cylinder(radius=r, height=h, sections=32), _moved(handle, [r + h * 0.2, 0, 0])])
    if name == "cross":
        a, b = u(1.2, 1.8), u(0.15, 0.3)
        return trimesh.util.concatenate([creation.box(extents=[a, b, b]), creation.box(extents=[b, a * u(0.6, 1.0), b]),
                                         creation.box(extents=[b, b, a * u(0.6, 1.0)])])
    raise KeyError(name)


def random_pose(rng: np.random.Generator, tilt_deg: float) -> np.ndarray:
    """A rotation about z by a uniform angle, then a tilt of up to ``tilt_deg`` about a random horizontal axis."""
    rz = trimesh.transformations.rotation_matrix(rng.uniform(0, 2 * np.pi), [0, 0, 1])
    phi = rng.uniform(0, 2 * np.pi)
    rt = trimesh.transformations.rotation_matrix(np.deg2rad(rng.uniform(0, tilt_deg)), [np.cos(phi), np.sin(phi), 0])
    return (rt @ rz)[:3, :3]


def normalise(p: np.ndarray) -> np.ndarray:
    """Centre on the centroid and scale into the unit ball (the usual ModelNet/ScanObjectNN normalisation)."""
    p = p - p.mean(0)
    return p / max(float(np.linalg.norm(p, axis=1).max()), 1e-9)


def corrupt(p: np.ndarray, rng: np.random.Generator, s: dict) -> np.ndarray:
    """Hard split: cut away one side (keep a random share of points), add a floor patch of clutter, jitter."""
    v = rng.normal(size=3)
    v /= np.linalg.norm(v)
    keep = rng.uniform(*s["keep_range"])
    proj = p @ v
    p = p[proj <= np.quantile(proj, keep)]
    n_bg = int(round(len(p) * rng.uniform(*s["clutter_range"])))
    z0 = p[:, 2].min() - 0.05
    floor = np.column_stack([rng.uniform(-1.2, 1.2, n_bg), rng.uniform(-1.2, 1.2, n_bg), np.full(n_bg, z0)])
    p = np.concatenate([p, floor])
    return p + rng.normal(scale=s["jitter"], size=p.shape)


def sample_cloud(name: str, n_points: int, rng: np.random.Generator, s: dict, hard: bool) -> np.ndarray:
    """``n_points`` surface points of one random instance, posed, sized, (corrupted,) normalised: float32."""
    mesh = build_mesh(name, rng)
    mesh.apply_scale(rng.uniform(0.75, 1.25, size=3))
    pts = trimesh.sample.sample_surface(mesh, 3 * n_points, seed=int(rng.integers(2**31)))[0]
    pts = normalise(pts @ random_pose(rng, s["tilt_deg"]).T)
    if hard:
        pts = normalise(corrupt(pts, rng, s))
    else:
        pts = pts + rng.normal(scale=s["pretrain_jitter"], size=pts.shape)
    idx = rng.choice(len(pts), size=n_points, replace=len(pts) < n_points)
    return pts[idx].astype(np.float32)
