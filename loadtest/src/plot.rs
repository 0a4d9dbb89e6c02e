//! The SVG plot of one or more reports: throughput over time above, latency percentiles over
//! time below, the warm-up shaded.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{Report, Sample};

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 720;
/// Line colours, in order: distinct on white and for the common forms of colour blindness.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

type Series<'a> = (String, Vec<(f64, f64)>);

/// Writes the plot of `reports` (label, report) to `path`; labels tell reports apart when
/// comparing, and may be empty for one report.
pub(crate) fn write(path: &Path, reports: &[(&str, &Report)]) -> anyhow::Result<()> {
    let t_max = reports.iter().filter_map(|(_, r)| r.timeline.last()).map(|s| s.t).fold(1.0, f64::max);
    let warmup = reports.iter().map(|(_, r)| r.warmup_seconds).fold(0.0, f64::max);
    let single = reports.len() == 1;
    let points = |r: &Report, value: fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        r.timeline.iter().filter_map(|s| value(s).map(|v| (s.t, v))).collect()
    };
    let mut throughput: Vec<Series<'_>> = Vec::new();
    let mut latency: Vec<Series<'_>> = Vec::new();
    for (label, r) in reports {
        let name = |what: &str| if label.is_empty() { what.to_owned() } else { format!("{label}: {what}") };
        if r.produce.is_some() {
            throughput.push((name("produce MB/s"), points(r, |s| Some(s.produce_mb_per_second))));
            latency.push((name("produce p99"), points(r, |s| s.produce_p99_ms)));
            if single {
                latency.push((name("produce p50"), points(r, |s| s.produce_p50_ms)));
            }
        }
        if r.consume.is_some() {
            throughput.push((name("consume MB/s"), points(r, |s| Some(s.consume_mb_per_second))));
            if r.consume.as_ref().is_some_and(|c| c.end_to_end_latency_ms.is_some()) {
                latency.push((name("end-to-end p99"), points(r, |s| s.end_to_end_p99_ms)));
                if single {
                    latency.push((name("end-to-end p50"), points(r, |s| s.end_to_end_p50_ms)));
                }
            }
        }
    }
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(HEIGHT / 2);
    panel(&upper, "Throughput", "MB/s", t_max, warmup, &throughput)?;
    panel(&lower, "Latency", "ms", t_max, warmup, &latency)?;
    root.present()?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    t_max: f64,
    warmup: f64,
    series: &[Series<'_>],
) -> anyhow::Result<()> {
    let y_max = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(0.0, f64::max).max(1e-3) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart.configure_mesh().x_desc("seconds since start").y_desc(unit).light_line_style(WHITE.mix(0.0)).draw()?;
    if warmup > 0.0 {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.0), (warmup.min(t_max), y_max)],
            BLACK.mix(0.06).filled(),
        )))?;
    }
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}
