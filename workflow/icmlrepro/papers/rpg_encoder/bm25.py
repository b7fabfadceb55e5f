"""Okapi BM25 over token lists with Lucene's idf (checked against bm25s's ``lucene`` method in the tests:
equal up to the factor k1 + 1 that Lucene and bm25s drop from the numerator, which changes no ranking).

score(d, q) = sum over query terms t (each distinct term once) of
    idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          (the Lucene variant, never negative)

The document-term weights are precomputed as one sparse matrix, so a query costs one sparse
column slice and a sum. :meth:`BM25.score_doc` scores one altered document (the gold unit with
the words a synthetic issue copied from it removed) against the corpus statistics of the index.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = float(k1), float(b)
        vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, doc in enumerate(docs):
            for t in doc:
                rows.append(i)
                cols.append(vocab.setdefault(t, len(vocab)))
        self.vocab = vocab
        n = len(docs)
        tf = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, max(len(vocab), 1)))
        tf.sum_duplicates()
        dl = np.asarray(tf.sum(axis=1)).ravel()
        avgdl = self.avgdl = dl.mean() if n and dl.mean() > 0 else 1.0
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        norm = self.k1 * (1 - self.b + self.b * dl / avgdl)
        w = tf.copy().astype(float)
        row_of = np.repeat(np.arange(n), np.diff(w.indptr))
        w.data = self.idf[w.indices] * w.data * (self.k1 + 1) / (w.data + norm[row_of])
        self.weights = w.tocsc()
        self.n_docs = n

    def scores(self, query: list[str]) -> np.ndarray:
        """BM25 score of every document for the query tokens (unknown tokens contribute nothing)."""
        cols = sorted({self.vocab[t] for t in query if t in self.vocab})
        if not cols:
            return np.zeros(self.n_docs)
        return np.asarray(self.weights[:, cols].sum(axis=1)).ravel()

    def score_doc(self, doc: list[str], query: list[str]) -> float:
        """BM25 score of one document ``doc`` (not necessarily indexed) with this index's idf and avgdl."""
        tf: dict[str, int] = {}
        for t in doc:
            tf[t] = tf.get(t, 0) + 1
        norm = self.k1 * (1 - self.b + self.b * len(doc) / self.avgdl)
        return float(sum(self.idf[self.vocab[t]] * tf[t] * (self.k1 + 1) / (tf[t] + norm)
                         for t in set(query) if t in tf and t in self.vocab))
