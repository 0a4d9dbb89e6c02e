"""Draws deploy/grafana/floe.json's panels from a Prometheus's data as one HTML page of SVG line
charts, and photographs it with headless Chromium: a picture of what the dashboard shows over a
test load, where no Grafana can be installed. Used by test_observability.py."""

from __future__ import annotations

import html
import math
import os
import shutil
from pathlib import Path

import requests

COLORS = ["#0a58ca", "#b42318", "#1a7f37", "#8250df", "#bf8700", "#0e7490"]
W, H, PAD = 380, 150, 8


def legend(template: str, labels: dict) -> str:
    out = template
    for k, v in labels.items():
        out = out.replace("{{" + k + "}}", v)
    return out


def panel_svg(series: list[tuple[str, list[tuple[float, float]]]]) -> str:
    points = [p for _, pts in series for p in pts]
    if not points:
        return f'<svg width="{W}" height="{H}"><text x="10" y="70" fill="#888">no data</text></svg>'
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    vmax = max(max(p[1] for p in points), 1e-12)
    vmin = min(min(p[1] for p in points), 0)
    span_t, span_v = max(t1 - t0, 1), max(vmax - vmin, 1e-12)
    lines = []
    for i, (_, pts) in enumerate(series):
        coords = " ".join(f"{PAD + (t - t0) / span_t * (W - 2 * PAD):.1f},"
                          f"{H - PAD - (v - vmin) / span_v * (H - 2 * PAD - 12):.1f}" for t, v in pts)
        lines.append(f'<polyline points="{coords}" fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.6"/>')
    top = f'<text x="{PAD}" y="11" font-size="10" fill="#666">{vmax:.4g}</text>'
    return f'<svg width="{W}" height="{H}" style="background:#fbfcfd;border:1px solid #ddd">{top}{"".join(lines)}</svg>'


def render(dashboard: dict, prometheus_url: str, start: float, end: float, rate_window: str, out: Path) -> Path | None:
    """Writes out (a PNG) and returns it; None when no browser is installed."""
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_bin:
        return None
    step = max(1, math.ceil((end - start) / 120))
    parts = ['<html><body style="font:12px system-ui;margin:10px;width:1180px">',
             '<h2 style="margin:4px 0">Floe (deploy/grafana/floe.json, drawn from a test load)</h2>']
    for p in dashboard["panels"]:
        if p["type"] == "row":
            parts.append(f'<h3 style="clear:both;margin:10px 0 4px">{html.escape(p["title"])}</h3>')
            continue
        series = []
        for t in p["targets"]:
            expr = t["expr"].replace("$__rate_interval", rate_window)
            r = requests.get(f"{prometheus_url}/api/v1/query_range", timeout=20,
                             params={"query": expr, "start": start, "end": end, "step": step}).json()
            for s in r.get("data", {}).get("result", [])[:6]:
                pts = [(float(ts), float(v)) for ts, v in s["values"] if v not in ("NaN", "+Inf", "-Inf")]
                series.append((legend(t["legendFormat"], s["metric"]), pts))
        names = " ".join(f'<span style="color:{COLORS[i % len(COLORS)]}">■ {html.escape(n)}</span>'
                         for i, (n, _) in enumerate(series))
        parts.append(f'<div style="float:left;margin:0 8px 8px 0;width:{W}px"><b>{html.escape(p["title"])}</b>'
                     f' <span style="color:#666">({html.escape(p["fieldConfig"]["defaults"]["unit"])})</span><br>'
                     f'{panel_svg(series)}<div style="height:30px;overflow:hidden">{names}</div></div>')
    parts.append("</body></html>")
    page = out.with_suffix(".html")
    page.write_text("\n".join(parts))

    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1210,2400"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=options)
    try:
        driver.get(page.resolve().as_uri())
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1210, height + 40)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
    return out
