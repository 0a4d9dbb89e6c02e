//! `compare a.json b.json`: each headline figure of two reports side by side, with the ratio of
//! the second to the first, and optionally one plot of both.

use std::path::PathBuf;

use crate::report::Report;

#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The baseline report.
    baseline: PathBuf,
    /// The report compared with it.
    candidate: PathBuf,
    /// Also write an SVG plot of both timelines here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A figure of a report, and whether more of it is better.
struct Figure {
    name: &'static str,
    higher_is_better: bool,
    value: fn(&Report) -> Option<f64>,
}

const FIGURES: &[Figure] = &[
    Figure {
        name: "produce MB/s",
        higher_is_better: true,
        value: |r| r.produce.as_ref().map(|p| p.throughput.mb_per_second),
    },
    Figure {
        name: "produce records/s",
        higher_is_better: true,
        value: |r| r.produce.as_ref().map(|p| p.throughput.records_per_second),
    },
    Figure { name: "produce p50 ms", higher_is_better: false, value: |r| r.produce.as_ref().map(|p| p.latency_ms.p50) },
    Figure { name: "produce p99 ms", higher_is_better: false, value: |r| r.produce.as_ref().map(|p| p.latency_ms.p99) },
    Figure {
        name: "produce p99.9 ms",
        higher_is_better: false,
        value: |r| r.produce.as_ref().map(|p| p.latency_ms.p999),
    },
    Figure {
        name: "consume MB/s",
        higher_is_better: true,
        value: |r| r.consume.as_ref().map(|c| c.throughput.mb_per_second),
    },
    Figure {
        name: "end-to-end p50 ms",
        higher_is_better: false,
        value: |r| r.consume.as_ref().and_then(|c| c.end_to_end_latency_ms).map(|l| l.p50),
    },
    Figure {
        name: "end-to-end p99 ms",
        higher_is_better: false,
        value: |r| r.consume.as_ref().and_then(|c| c.end_to_end_latency_ms).map(|l| l.p99),
    },
    Figure { name: "errors", higher_is_better: false, value: |r| Some(r.errors.values().sum::<u64>() as f64) },
    Figure {
        name: "PUTs per GiB produced",
        higher_is_better: false,
        value: |r| r.cost.as_ref().and_then(|c| c.puts_per_gib_produced),
    },
    Figure {
        name: "GETs per GiB consumed",
        higher_is_better: false,
        value: |r| r.cost.as_ref().and_then(|c| c.gets_per_gib_consumed),
    },
    Figure {
        name: "agent CPU s per GiB",
        higher_is_better: false,
        value: |r| r.cost.as_ref().and_then(|c| c.agent_cpu_seconds_per_gib),
    },
    Figure { name: "USD per GiB", higher_is_better: false, value: |r| r.cost.as_ref().and_then(|c| c.usd_per_gib) },
    Figure {
        name: "table PUTs per GiB converted",
        higher_is_better: false,
        value: |r| r.cost.as_ref().and_then(|c| c.tables.as_ref()).map(|t| t.puts_per_gib_converted),
    },
    Figure {
        name: "table job s per GiB converted",
        higher_is_better: false,
        value: |r| r.cost.as_ref().and_then(|c| c.tables.as_ref()).map(|t| t.job_seconds_per_gib_converted),
    },
    Figure { name: "generator CPU s per GiB", higher_is_better: false, value: |r| r.generator.cpu_seconds_per_gib },
];

pub(crate) fn run(args: CompareArgs) -> anyhow::Result<()> {
    let a = Report::read(&args.baseline)?;
    let b = Report::read(&args.candidate)?;
    let rows: Vec<_> = FIGURES
        .iter()
        .filter_map(|f| {
            let (va, vb) = ((f.value)(&a), (f.value)(&b));
            if va.is_none() && vb.is_none() {
                return None;
            }
            let ratio = va.zip(vb).filter(|(va, _)| *va != 0.0).map(|(va, vb)| vb / va);
            Some((f, va, vb, ratio))
        })
        .collect();
    if args.json {
        let json: Vec<_> = rows
            .iter()
            .map(|(f, va, vb, ratio)| {
                serde_json::json!({ "figure": f.name, "baseline": va, "candidate": vb, "ratio": ratio, "higher_is_better": f.higher_is_better })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let cell = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
        println!("{:<26} {:>14} {:>14} {:>8}", "figure", "baseline", "candidate", "ratio");
        for (f, va, vb, ratio) in &rows {
            let verdict = match ratio {
                Some(r) if (r - 1.0).abs() < 0.05 => "",
                Some(r) if (*r > 1.0) == f.higher_is_better => "  better",
                Some(_) => "  worse",
                None => "",
            };
            println!(
                "{:<26} {:>14} {:>14} {:>8}{verdict}",
                f.name,
                cell(*va),
                cell(*vb),
                ratio.map_or("-".to_owned(), |r| format!("{r:.2}x"))
            );
        }
        println!("baseline:  {}\ncandidate: {}", args.baseline.display(), args.candidate.display());
    }
    if let Some(path) = &args.plot {
        crate::plot::write(path, &[("baseline", &a), ("candidate", &b)])?;
        eprintln!("plot written to {}", path.display());
    }
    Ok(())
}
