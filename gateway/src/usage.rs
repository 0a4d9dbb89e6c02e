//! Usage queries, as `GET /v1/admin/usage` and `floe admin usage` answer them: a tenant's (or
//! every tenant's) meters per minute or hour over a range, with totals.

use floe_metadata::{HOUR_MS, MINUTE_MS, Meter, Meters, UsageLedger};
use serde_json::{Map, Value, json};

/// Longest range one usage query covers.
const USAGE_RANGE_MS_MAX: i64 = 32 * 24 * HOUR_MS;
/// Most rows one answer holds (a month of hours for about 130 tenants).
const USAGE_ROWS_MAX: usize = 100_000;

/// A checked usage query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageQuery {
    pub tenant: Option<String>,
    pub from_ms: i64,
    /// Exclusive.
    pub to_ms: i64,
    /// A minute or an hour.
    pub step_ms: i64,
}

/// RFC 3339 or milliseconds since the epoch.
pub fn parse_time(name: &str, value: &str) -> Result<i64, String> {
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(value)
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{name}: {value:?} is neither RFC 3339 nor milliseconds ({e})"))
}

pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

impl UsageQuery {
    /// `to` defaults to now and `from` to an hour before it; `granularity` is `minute`
    /// (default) or `hour`.
    pub fn parse(
        tenant: Option<String>,
        from: Option<&str>,
        to: Option<&str>,
        granularity: Option<&str>,
    ) -> Result<Self, String> {
        let to_ms = to.map(|t| parse_time("to", t)).transpose()?.unwrap_or_else(floe_metadata::now_ms);
        let from_ms = from.map(|t| parse_time("from", t)).transpose()?.unwrap_or(to_ms - HOUR_MS);
        if from_ms >= to_ms || to_ms - from_ms > USAGE_RANGE_MS_MAX {
            return Err(format!("from must be before to, at most {} days apart", USAGE_RANGE_MS_MAX / (24 * HOUR_MS)));
        }
        let step_ms = match granularity {
            None | Some("minute") => MINUTE_MS,
            Some("hour") => HOUR_MS,
            Some(other) => return Err(format!("granularity {other:?}: use minute or hour")),
        };
        Ok(Self { tenant, from_ms, to_ms, step_ms })
    }

    /// The answer: one row per period and tenant with every meter, totals per tenant, and the
    /// end of the last minute the cluster closed (later minutes may still grow).
    pub fn answer(&self, usage: &UsageLedger) -> Result<Value, String> {
        let summary = usage.summarize(self.tenant.as_deref(), self.from_ms, self.to_ms, self.step_ms);
        if summary.periods.len() > USAGE_ROWS_MAX {
            return Err(format!(
                "more than {USAGE_ROWS_MAX} rows: ask for granularity=hour, one tenant or a shorter range"
            ));
        }
        let rows: Vec<Value> = summary
            .periods
            .iter()
            .map(|((start, tenant), meters)| {
                json!({ "start": rfc3339(*start), "start_ms": start, "tenant": tenant, "meters": named(meters) })
            })
            .collect();
        let totals: Map<String, Value> =
            summary.totals.iter().map(|(tenant, meters)| (tenant.clone(), named(meters).into())).collect();
        Ok(json!({
            "from": rfc3339(self.from_ms),
            "to": rfc3339(self.to_ms),
            "granularity": if self.step_ms == HOUR_MS { "hour" } else { "minute" },
            "closed_through": usage.closed_through_ms.map(|ms| rfc3339(ms + MINUTE_MS)),
            "rows": rows,
            "totals": totals,
        }))
    }
}

/// Every meter by name, zero where nothing was counted.
fn named(meters: &Meters) -> Map<String, Value> {
    Meter::ALL.iter().map(|m| (m.name().to_owned(), meters.get(m).copied().unwrap_or(0).into())).collect()
}
