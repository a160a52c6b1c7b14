"""The report across machines (`cellbench report --merge`): `gather` collects one `Merged`
document from several machines' result folders, `render` declares that document and writes
MERGED.md and its plots, `index` the self-contained index.html, all from the document alone."""
