"""HTML leaderboards from results.json files (`harness leaderboard RESULTS... --out DIR`).

build.py   results files -> one leaderboard model (rows = runs; cells, deltas, drill-down, provenance)
render.py  the model -> one self-contained HTML page (jinja2, autoescape on, inline CSS/JS)
svg.py     inline SVG charts: score vs length, score vs checkpoint step (the paper's Figure 4)
export.py  the model -> CSV, JSON and Markdown tables of what the page shows
"""
