//! The run as a picture: acknowledged records per second of each topic, with every fault's
//! window shaded and named, so a stall or a slow recovery lines up with the fault behind it.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::history::{Entry, Event};

const WIDTH: u32 = 1200;
/// Most faults whose names are written on the plot.
const LABELLED_FAULTS_MAX: usize = 24;
const HEIGHT: u32 = 520;
const COLOURS: [RGBColor; 4] =
    [RGBColor(0, 114, 178), RGBColor(213, 94, 0), RGBColor(0, 158, 115), RGBColor(204, 121, 167)];

pub(crate) fn write(path: &Path, history: &[Entry]) -> anyhow::Result<()> {
    let seconds = history.last().map_or(1, |e| e.t_ms / 1000 + 1) as usize;
    let mut per_topic: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut windows: Vec<(f64, f64, &str)> = Vec::new();
    let mut open: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for e in history {
        let t = e.t_ms as f64 / 1000.0;
        match &e.event {
            Event::Acked { topic, .. } => {
                per_topic.entry(topic).or_insert_with(|| vec![0.0; seconds])[(e.t_ms / 1000) as usize] += 1.0;
            }
            Event::FaultStart { fault, target } => {
                open.insert((fault, target), t);
            }
            Event::FaultEnd { fault, target } => {
                if let Some(start) = open.remove(&(fault.as_str(), target.as_str())) {
                    windows.push((start, t, fault));
                }
            }
            _ => {}
        }
    }
    let y_max = per_topic.values().flatten().copied().fold(1.0, f64::max) * 1.25;
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Acknowledged records per second, faults shaded", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..seconds as f64, 0.0..y_max)?;
    chart.configure_mesh().x_desc("seconds since start").y_desc("records/s").light_line_style(WHITE.mix(0.0)).draw()?;
    // Past a few dozen faults their names would overprint each other: only the shading stays.
    let labelled = windows.len() <= LABELLED_FAULTS_MAX;
    for (i, (start, end, fault)) in windows.iter().enumerate() {
        chart.draw_series(std::iter::once(Rectangle::new([(*start, 0.0), (*end, y_max)], RED.mix(0.12).filled())))?;
        if labelled {
            // Alternate label heights so neighbouring faults do not overwrite each other.
            let y = y_max * if i % 2 == 0 { 0.97 } else { 0.91 };
            chart.draw_series(std::iter::once(Text::new(fault.to_string(), (*start, y), ("sans-serif", 11))))?;
        }
    }
    for (i, (topic, counts)) in per_topic.iter().enumerate() {
        let color = COLOURS[i % COLOURS.len()];
        let points = counts.iter().enumerate().map(|(s, c)| (s as f64 + 0.5, *c));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(*topic)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    root.present()?;
    Ok(())
}
