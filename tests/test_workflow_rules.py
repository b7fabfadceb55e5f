"""Static checks of the rule files: every .smk shares one Python namespace (the Snakefile's)."""

import re

from .conftest import ROOT


def test_names_a_paper_imports_into_the_snakefile_are_prefixed_with_its_id():
    """Two papers importing the same name (say ``per_seed_tables``) would silently feed one paper's
    files to the other's rules: the later import wins when the input functions run."""
    shared = {"common", "device", "lm", "report"}
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        if smk.stem in shared:
            continue
        text = smk.read_text()
        imports = re.findall(r"^from \S+ import \(([^)]*)\)", text, flags=re.M)
        imports += re.findall(r"^from \S+ import ([^(\n]+)$", text, flags=re.M)
        for names in imports:
            for name in (n.strip().split(" as ")[-1] for n in names.split(",") if n.strip()):
                assert name.startswith(smk.stem), f"{smk.name}: imports {name!r}; prefix it with {smk.stem!r}"
