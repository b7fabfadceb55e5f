"""Shared machinery every paper uses: config, seeding, io, metrics, claims, verdicts, report."""
