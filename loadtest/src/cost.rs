//! The cost view: Floe's Prometheus counters scraped before and after a run, turned into
//! object-store requests, bytes and agent CPU per GiB, and the generator's own CPU.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::report::{Cost, Prices, TableCost};
use crate::run::RunArgs;

/// Port of Floe's HTTP listener when nothing says otherwise (`--http-addr` default).
const FLOE_HTTP_PORT_DEFAULT: u16 = 8080;
/// Longest a scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest metrics page read.
const METRICS_BYTES_MAX: usize = 16 * 1024 * 1024;
/// A series only Floe exports: how a probed endpoint is recognised as Floe's.
const FLOE_MARKER: &str = "floe_object_store_put_requests_total";
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The endpoints to scrape: those given, or Floe's default one on the bootstrap host if it
/// answers as Floe. None found means no cost view (the target may not be Floe).
pub(crate) fn metrics_urls(bootstrap: &str, given: &[String]) -> anyhow::Result<Vec<String>> {
    if !given.is_empty() {
        for url in given {
            if !url.starts_with("http://") {
                bail!("--metrics {url:?}: only http:// URLs are supported");
            }
        }
        return Ok(given.to_vec());
    }
    let host = bootstrap.split(',').next().and_then(|a| a.rsplit_once(':')).map_or(bootstrap, |(h, _)| h);
    let url = format!("http://{host}:{FLOE_HTTP_PORT_DEFAULT}/metrics");
    match fetch(&url, Duration::from_secs(1)) {
        Ok(body) if body.contains(FLOE_MARKER) => Ok(vec![url]),
        _ => Ok(Vec::new()),
    }
}

fn fetch(url: &str, timeout: Duration) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(timeout).build()?;
        let response = client.get(url).send().await?.error_for_status()?;
        if response.content_length().is_some_and(|n| n > METRICS_BYTES_MAX as u64) {
            bail!("{url}: metrics page larger than {METRICS_BYTES_MAX} bytes");
        }
        let body = response.bytes().await?;
        if body.len() > METRICS_BYTES_MAX {
            bail!("{url}: metrics page larger than {METRICS_BYTES_MAX} bytes");
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    })
}

/// Every series of the scraped endpoints, summed by name and labels.
#[derive(Debug, Default)]
pub(crate) struct MetricsSnapshot(HashMap<String, f64>);

impl MetricsSnapshot {
    pub(crate) fn scrape(urls: &[String]) -> anyhow::Result<Option<Self>> {
        if urls.is_empty() {
            return Ok(None);
        }
        let mut series = HashMap::new();
        for url in urls {
            let body = fetch(url, SCRAPE_TIMEOUT).with_context(|| format!("scraping {url}"))?;
            for (name, value) in parse(&body) {
                *series.entry(name.to_owned()).or_default() += value;
            }
        }
        Ok(Some(Self(series)))
    }

    /// Sum of every series of metric `name` (all label sets).
    pub(crate) fn total(&self, name: &str) -> f64 {
        self.0
            .iter()
            .filter(|(series, _)| {
                series.as_str() == name || series.strip_prefix(name).is_some_and(|r| r.starts_with('{'))
            })
            .map(|(_, v)| v)
            .sum()
    }

    fn get(&self, series: &str) -> Option<f64> {
        self.0.get(series).copied()
    }
}

/// Series and values of a Prometheus text page; comments and malformed lines are skipped.
fn parse(body: &str) -> impl Iterator<Item = (&str, f64)> {
    body.lines().filter(|l| !l.starts_with('#')).filter_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        Some((series.trim(), value.trim().parse::<f64>().ok()?))
    })
}

impl Cost {
    pub(crate) fn between(
        args: &RunArgs,
        metrics_urls: Vec<String>,
        before: &MetricsSnapshot,
        after: &MetricsSnapshot,
        gib_produced: f64,
        gib_consumed: f64,
    ) -> Self {
        let delta = |name: &str| (after.total(name) - before.total(name)).max(0.0);
        // Every outcome counts: a failed request is billed too, and so is the losing attempt of
        // a hedged PUT, which is dropped unanswered.
        let puts = delta("floe_object_store_put_requests_total") + delta("floe_object_store_put_abandoned_total");
        let gets = delta("floe_object_store_get_requests_total");
        let other = delta("floe_object_store_delete_requests_total") + delta("floe_object_store_list_requests_total");
        let put_bytes = delta("floe_object_store_put_bytes_total");
        let get_bytes = delta("floe_object_store_get_bytes_total");
        let cpu = after
            .get("process_cpu_seconds_total")
            .zip(before.get("process_cpu_seconds_total"))
            .map(|(a, b)| (a - b).max(0.0));
        let per = |n: f64, gib: f64| (gib > 0.0).then(|| n / gib);
        let gib_moved = gib_produced + gib_consumed;
        let prices = Prices {
            usd_per_1000_puts: args.price_per_1000_puts,
            usd_per_1000_gets: args.price_per_1000_gets,
            usd_per_vcpu_hour: args.price_per_vcpu_hour,
        };
        let usd = puts / 1000.0 * prices.usd_per_1000_puts
            + gets / 1000.0 * prices.usd_per_1000_gets
            + cpu.unwrap_or(0.0) / 3600.0 * prices.usd_per_vcpu_hour;
        Cost {
            metrics_urls,
            gib_produced,
            gib_consumed,
            object_store_put_requests: puts,
            object_store_put_bytes: put_bytes,
            object_store_get_requests: gets,
            object_store_get_bytes: get_bytes,
            object_store_other_requests: other,
            puts_per_gib_produced: per(puts, gib_produced),
            put_bytes_per_byte_produced: per(put_bytes / GIB, gib_produced),
            gets_per_gib_consumed: per(gets, gib_consumed),
            get_bytes_per_byte_consumed: per(get_bytes / GIB, gib_consumed),
            agent_cpu_seconds: cpu,
            agent_cpu_seconds_per_gib: cpu.and_then(|c| per(c, gib_moved)),
            usd_per_gib: per(usd, gib_moved),
            prices,
            tables: TableCost::between(before, after),
        }
    }
}

impl TableCost {
    fn between(before: &MetricsSnapshot, after: &MetricsSnapshot) -> Option<Self> {
        let delta = |name: &str| (after.total(name) - before.total(name)).max(0.0);
        let gib_converted = delta("floe_table_read_bytes_total") / GIB;
        if gib_converted <= 0.0 {
            return None;
        }
        let requests = |operation: &str| {
            let series = format!("floe_table_object_requests_total{{operation=\"{operation}\"}}");
            (after.get(&series).unwrap_or(0.0) - before.get(&series).unwrap_or(0.0)).max(0.0)
        };
        let (puts, gets) = (requests("put"), requests("get"));
        Some(Self {
            gib_converted,
            put_requests: puts,
            get_requests: gets,
            puts_per_gib_converted: puts / gib_converted,
            gets_per_gib_converted: gets / gib_converted,
            bytes_written_per_byte_converted: delta("floe_table_bytes_written_total") / GIB / gib_converted,
            job_seconds_per_gib_converted: delta("floe_table_convert_seconds_total") / gib_converted,
        })
    }
}

/// CPU seconds this process has used, all threads (librdkafka's included).
pub(crate) fn own_cpu_seconds() -> Option<f64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    Some((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_series_with_and_without_labels() {
        let page = "# HELP x y\nfloe_object_store_put_requests_total{outcome=\"ok\"} 12\n\
            floe_object_store_put_requests_total{outcome=\"error\"} 1\nprocess_cpu_seconds_total 3.5\nbad line x\n";
        let snapshot = MetricsSnapshot(parse(page).map(|(k, v)| (k.to_owned(), v)).collect());
        assert_eq!(snapshot.total("floe_object_store_put_requests_total"), 13.0);
        assert_eq!(snapshot.total("floe_object_store_put"), 0.0);
        assert_eq!(snapshot.get("process_cpu_seconds_total"), Some(3.5));
    }

    #[test]
    fn table_cost_is_per_gib_converted_and_absent_without_conversion() {
        let page = |read: f64, puts: f64| {
            let text = format!(
                "floe_table_read_bytes_total {read}\nfloe_table_object_requests_total{{operation=\"put\"}} {puts}\n\
                 floe_table_object_requests_total{{operation=\"get\"}} 2\nfloe_table_bytes_written_total {}\n\
                 floe_table_convert_seconds_total 4\n",
                read / 2.0
            );
            MetricsSnapshot(parse(&text).map(|(k, v)| (k.to_owned(), v)).collect())
        };
        let before = page(GIB, 10.0);
        assert!(TableCost::between(&before, &before).is_none());
        let after = page(3.0 * GIB, 30.0);
        let cost = TableCost::between(&before, &after).unwrap();
        assert_eq!(cost.gib_converted, 2.0);
        assert_eq!(cost.puts_per_gib_converted, 10.0);
        assert_eq!(cost.gets_per_gib_converted, 0.0);
        assert_eq!(cost.bytes_written_per_byte_converted, 0.5);
    }
}
