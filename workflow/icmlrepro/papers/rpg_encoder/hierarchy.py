"""The functional hierarchy: files grouped into functional areas and sub-areas by what they do.

The paper's encoder asks an LLM to reorganise the lifted files into functional centroids
(levels above the file nodes), independent of the directory tree, and then grounds each
high-level node in the lowest common ancestor directory of its files. Without an LLM the
reorganisation is a two-level k-means over TF-IDF vectors of each file's summary and unit
features (areas, then sub-areas inside each area); a label is the centroid's top words.
Grounding is the common directory prefix. Incremental evolution *places* a new or re-summarised
file in the most similar existing sub-area instead of re-clustering (one placement call each),
and prunes sub-areas and areas left empty.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfVectorizer
from threadpoolctl import threadpool_limits

from .text import tokenize


@dataclass
class Hierarchy:
    area_label: dict[str, str] = field(default_factory=dict)
    sub_area: dict[str, str] = field(default_factory=dict)  # sub-area id -> area id
    sub_label: dict[str, str] = field(default_factory=dict)
    file_sub: dict[str, str] = field(default_factory=dict)  # file path -> sub-area id
    vectorizer: TfidfVectorizer | None = None
    centroids: dict[str, np.ndarray] = field(default_factory=dict)  # sub-area id -> unit vector

    def grounding(self, node: str) -> str:
        """Lowest common ancestor directory of the files under an area or sub-area."""
        files = [f for f, s in self.file_sub.items() if s == node or self.sub_area.get(s) == node]
        return os.path.commonpath([os.path.dirname(f) or "." for f in files]) if files else ""

    def prune(self) -> None:
        """Drop sub-areas without files and areas without sub-areas (after deletions or moves)."""
        used = set(self.file_sub.values())
        for s in [s for s in self.sub_area if s not in used]:
            del self.sub_area[s], self.sub_label[s]
            self.centroids.pop(s, None)
        areas = set(self.sub_area.values())
        for a in [a for a in self.area_label if a not in areas]:
            del self.area_label[a]


def _n_clusters(n: int, size: int) -> int:
    return max(1, min(n, int(round(n / size))))


def _label(centroid: np.ndarray, vocab: np.ndarray, n_terms: int) -> str:
    order = np.lexsort((vocab, -centroid))[:n_terms]
    return " ".join(vocab[i] for i in order if centroid[i] > 0)


def _kmeans(x, k: int, seed: int) -> np.ndarray:
    if k <= 1 or x.shape[0] <= 1:
        return np.zeros(x.shape[0], dtype=int)
    with threadpool_limits(1):
        return KMeans(n_clusters=k, n_init=3, random_state=seed).fit_predict(x)


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def build(file_docs: dict[str, str], area_size: int, sub_size: int, label_terms: int, seed: int) -> Hierarchy:
    """Cluster the files (path -> summary and features text) into areas and sub-areas."""
    paths = sorted(file_docs)
    h = Hierarchy()
    if not paths:
        return h
    vec = TfidfVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None, sublinear_tf=True)
    try:
        x = vec.fit_transform([file_docs[p] for p in paths])
    except ValueError:  # no word at all in any file: one area holds everything
        h.area_label["area0"], h.sub_area["area0.sub0"], h.sub_label["area0.sub0"] = "", "area0", ""
        h.file_sub.update({p: "area0.sub0" for p in paths})
        return h
    vocab = vec.get_feature_names_out()
    h.vectorizer = vec
    areas = _kmeans(x, _n_clusters(len(paths), area_size), seed)
    for a in sorted(set(areas)):
        idx = np.flatnonzero(areas == a)
        aid = f"area{a}"
        h.area_label[aid] = _label(np.asarray(x[idx].mean(axis=0)).ravel(), vocab, label_terms)
        subs = _kmeans(x[idx], _n_clusters(len(idx), sub_size), seed + 1 + int(a))
        for s in sorted(set(subs)):
            sidx = idx[subs == s]
            sid = f"{aid}.sub{s}"
            centroid = np.asarray(x[sidx].mean(axis=0)).ravel()
            h.sub_area[sid], h.sub_label[sid] = aid, _label(centroid, vocab, label_terms)
            h.centroids[sid] = _unit(centroid)
            for i in sidx:
                h.file_sub[paths[i]] = sid
    return h


def place(h: Hierarchy, path: str, doc: str) -> str:
    """Put one file in the existing sub-area whose centroid is most similar (ties: smallest id)."""
    if not h.centroids or h.vectorizer is None:  # no word vectors: the first sub-area (or a new one)
        sub = min(h.sub_area, default="area0.sub0")
        if sub not in h.sub_area:
            h.area_label["area0"], h.sub_area[sub], h.sub_label[sub] = "", "area0", ""
        h.file_sub[path] = sub
        return sub
    v = _unit(np.asarray(h.vectorizer.transform([doc]).todense()).ravel())
    best = max(sorted(h.centroids), key=lambda s: float(h.centroids[s] @ v))
    h.file_sub[path] = best
    return best
