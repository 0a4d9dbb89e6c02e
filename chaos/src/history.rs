//! What happened during a run, in order: every fault, every acknowledged or failed write, every
//! transaction outcome and every group offset seen. The checker reads it; on a failure the
//! verdict quotes the few events that explain it, and the whole history is written as JSON lines.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    FaultStart {
        fault: String,
        target: String,
    },
    FaultEnd {
        fault: String,
        target: String,
    },
    /// A write the service acknowledged at this offset.
    Acked {
        topic: String,
        partition: i32,
        offset: i64,
        value: String,
    },
    /// A write that failed or whose outcome is unknown; it may or may not be in the log.
    Failed {
        topic: String,
        value: String,
        error: String,
    },
    /// A transaction whose commit returned success, with how many records it wrote and the
    /// input offsets it consumed: (partition, first, last), a new range wherever they jump.
    TxnCommitted {
        txn: u64,
        records: usize,
        #[serde(default)]
        inputs: Vec<(i32, i64, i64)>,
    },
    /// A transaction aborted by the client; none of its records may be visible.
    TxnAborted {
        txn: u64,
        records: usize,
        reason: String,
    },
    /// A transaction whose outcome the client could not learn: all or none of it may be visible.
    TxnUnknown {
        txn: u64,
        records: usize,
        error: String,
    },
    /// The answer to a member's offset commit (after librdkafka's own retries of it): the
    /// commit's number in the order the member sent its commits, when it was sent, and per
    /// partition the offset and whether it was stored.
    OffsetCommitAnswered {
        group: String,
        member: u32,
        seq: u64,
        sent_ms: u64,
        offsets: Vec<(i32, i64, bool)>,
    },
    /// A group's committed offset as an outside observer read it, asked at `asked_ms`; with the
    /// member and commit number the commit's metadata names, for commits of the group workload.
    OffsetObserved {
        group: String,
        partition: i32,
        offset: i64,
        #[serde(default)]
        asked_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<(u32, u64)>,
    },
    /// A schema the registry answered with an id and a version.
    SchemaRegistered {
        subject: String,
        schema: String,
        id: i32,
        version: i32,
    },
    /// A registration that failed or whose outcome is unknown.
    SchemaFailed {
        subject: String,
        schema: String,
        error: String,
    },
    /// A keyed write to a compacted topic (`workloads::changelog`): the writer's version of the
    /// key, and what its write or transaction came to.
    KeyWritten {
        topic: String,
        partition: i32,
        key: String,
        version: u64,
        outcome: Outcome,
    },
    /// A DeleteRecords request about to be sent: records before `before` may go from now on.
    DeleteRecordsSent {
        topic: String,
        partition: i32,
        before: i64,
    },
    /// A DeleteRecords request answered with success: records before `before` are gone.
    RecordsDeleted {
        topic: String,
        partition: i32,
        before: i64,
    },
    /// A process that ended without the harness killing it, and how (`exit status: 1`,
    /// `signal: 6 (SIGABRT)`): a problem in the verdict.
    ProcessExited {
        process: String,
        status: String,
    },
    Note {
        text: String,
    },
}

/// What a write came to, as its client learnt it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Acknowledged, or its transaction committed: it must stay readable.
    Committed,
    /// Its transaction aborted: `read_committed` must never show it.
    Aborted,
    /// Either may have happened.
    Unknown,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Entry {
    /// Milliseconds since the run started.
    pub(crate) t_ms: u64,
    #[serde(flatten)]
    pub(crate) event: Event,
}

#[derive(Debug)]
pub(crate) struct History {
    start: Instant,
    entries: Mutex<Vec<Entry>>,
    /// Acknowledged idempotent writes: (run time of the ack, ms from send to ack).
    produce_latencies: Mutex<Vec<(u64, u64)>>,
}

impl History {
    pub(crate) fn new() -> Self {
        Self { start: Instant::now(), entries: Mutex::new(Vec::new()), produce_latencies: Mutex::new(Vec::new()) }
    }

    /// Records that an idempotent write sent `sent_ms` (run time) was acknowledged now.
    pub(crate) fn produce_latency(&self, sent_ms: u64) {
        let now = self.now_ms();
        self.produce_latencies.lock().unwrap_or_else(|p| p.into_inner()).push((now, now.saturating_sub(sent_ms)));
    }

    /// The 99th percentile of produce latency, in ms, of writes acknowledged in `from..to` (run
    /// time, ms), with how many there were.
    pub(crate) fn produce_p99(&self, from: u64, to: u64) -> (u64, usize) {
        let latencies = self.produce_latencies.lock().unwrap_or_else(|p| p.into_inner());
        let mut window: Vec<u64> = latencies.iter().filter(|(at, _)| (from..to).contains(at)).map(|l| l.1).collect();
        window.sort_unstable();
        let p99 = window.get((window.len() * 99 / 100).min(window.len().saturating_sub(1))).copied().unwrap_or(0);
        (p99, window.len())
    }

    /// [`History::produce_p99`] of each `window_ms` window of `from..to` (a last shorter window
    /// only if it holds writes).
    pub(crate) fn produce_p99_windows(&self, from: u64, to: u64, window_ms: u64) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let end = (at + window_ms.max(1)).min(to);
            let (p99, n) = self.produce_p99(at, end);
            if n > 0 {
                out.push((p99, n));
            }
            at = end;
        }
        out
    }

    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn push(&self, event: Event) {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Stamped under the lock, so the history is in time order.
        entries.push(Entry { t_ms: self.now_ms(), event });
    }

    pub(crate) fn note(&self, text: impl Into<String>) {
        self.push(Event::Note { text: text.into() });
    }

    /// Acknowledged writes, failed writes and committed transactions so far, for progress lines.
    pub(crate) fn tally(&self) -> (usize, usize, usize) {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.iter().fold((0, 0, 0), |(a, f, t), e| match e.event {
            Event::Acked { .. } => (a + 1, f, t),
            Event::Failed { .. } => (a, f + 1, t),
            Event::TxnCommitted { .. } => (a, f, t + 1),
            _ => (a, f, t),
        })
    }

    pub(crate) fn snapshot(&self) -> Vec<Entry> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub(crate) fn write_jsonl(&self, path: &Path) -> anyhow::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for entry in self.snapshot() {
            serde_json::to_writer(&mut out, &entry)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(())
    }
}
