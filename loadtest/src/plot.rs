//! The SVG plot of one or more reports: throughput over time, latency percentiles over time (the
//! warm-up shaded), and the latency distributions of the measured time, percentile by percentile.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{Percentiles, Report, Sample};

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 1080;
/// The distribution panel's x axis: evenly spaced, so each step adds a nine.
const LADDER: [&str; 5] = ["p50", "p90", "p99", "p99.9", "max"];
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
    let ladder = |p: &Percentiles| -> Vec<(f64, f64)> {
        [p.p50, p.p90, p.p99, p.p999, p.max].into_iter().enumerate().map(|(i, ms)| (i as f64, ms)).collect()
    };
    let mut throughput: Vec<Series<'_>> = Vec::new();
    let mut latency: Vec<Series<'_>> = Vec::new();
    let mut distribution: Vec<Series<'_>> = Vec::new();
    for (label, r) in reports {
        let name = |what: &str| if label.is_empty() { what.to_owned() } else { format!("{label}: {what}") };
        if let Some(produce) = &r.produce {
            distribution.push((name("produce"), ladder(&produce.latency_ms)));
        }
        if let Some(end_to_end) = r.consume.as_ref().and_then(|c| c.end_to_end_latency_ms.as_ref()) {
            distribution.push((name("end-to-end"), ladder(end_to_end)));
        }
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
    let (upper, rest) = root.split_vertically(HEIGHT / 3);
    let (middle, lower) = rest.split_vertically(HEIGHT / 3);
    panel(&upper, "Throughput", "MB/s", t_max, warmup, &throughput)?;
    panel(&middle, "Latency", "ms", t_max, warmup, &latency)?;
    distribution_panel(&lower, &distribution)?;
    root.present()?;
    Ok(())
}

/// Latency by percentile over the measured time, one line per report and kind.
fn distribution_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    series: &[Series<'_>],
) -> anyhow::Result<()> {
    let y_max = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(0.0, f64::max).max(1e-3) * 1.1;
    let last = (LADDER.len() - 1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption("Latency distribution (measured time)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.1..last + 0.1, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_labels(LADDER.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && (0.0..=last).contains(&i) {
                LADDER[i as usize].to_owned()
            } else {
                String::new()
            }
        })
        .x_desc("percentile")
        .y_desc("ms")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    lines(&mut chart, series, true, SeriesLabelPosition::UpperLeft)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws `series` as lines (with a dot at each point if `dots`) and their legend.
fn lines<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    series: &[Series<'_>],
    dots: bool,
    legend: SeriesLabelPosition,
) -> anyhow::Result<()> {
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if dots {
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
        }
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(legend)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
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
    lines(&mut chart, series, false, SeriesLabelPosition::UpperRight)
}
