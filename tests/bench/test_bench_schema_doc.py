"""docs/RESULTS_SCHEMA.md is generated from specbench.runs.schema and must stay in sync with it."""

from pathlib import Path

from specbench.runs.schema import schema_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "RESULTS_SCHEMA.md"


def test_schema_doc_is_current():
    assert DOC.read_text().strip() == schema_markdown().strip(), (
        "regenerate: python -c 'from specbench.runs.schema import schema_markdown; print(schema_markdown())' "
        "> docs/RESULTS_SCHEMA.md"
    )
