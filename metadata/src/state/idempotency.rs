//! HTTP idempotency keys. Each key writes as an idempotent producer of its own, with sequences
//! that start at 0 in every partition; a retried request re-sends the same records with the same
//! sequences, so the producer-chunk deduplication in `transactions.rs` answers it with the
//! original offsets, through any agent and across restarts.

use super::State;
use crate::command::{CommandError, Outcome, ProducerIdEpoch};
use crate::limits::IDEMPOTENCY_KEY_BYTES_MAX;

/// What a known idempotency key stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdempotencyKeyRecord {
    pub producer_id: i64,
    /// Identifies the request first sent under the key (its topic, partition and body).
    pub request_digest: u64,
    pub created_ms: i64,
}

impl State {
    pub(super) fn init_idempotency_key(
        &mut self,
        key: String,
        request_digest: u64,
        now_ms: i64,
        tenant: Option<String>,
    ) -> Result<Outcome, CommandError> {
        if key.is_empty() || key.len() > IDEMPOTENCY_KEY_BYTES_MAX {
            return Err(CommandError::InvalidIdempotencyKey(format!(
                "{} bytes; keys have 1 to {IDEMPOTENCY_KEY_BYTES_MAX}",
                key.len()
            )));
        }
        if let Some(known) = self.idempotency_keys.get(&key) {
            if known.request_digest != request_digest {
                return Err(CommandError::IdempotencyKeyReused(key));
            }
            let epoch = self.producers.get(&known.producer_id).map_or(0, |p| p.epoch);
            return Ok(Outcome::IdempotencyKey {
                producer: ProducerIdEpoch { producer_id: known.producer_id, producer_epoch: epoch },
                retry: true,
            });
        }
        let producer_id = self.allocate_producer_id(None, tenant, now_ms)?;
        self.idempotency_keys.insert(key, IdempotencyKeyRecord { producer_id, request_digest, created_ms: now_ms });
        Ok(Outcome::IdempotencyKey { producer: ProducerIdEpoch { producer_id, producer_epoch: 0 }, retry: false })
    }

    /// Drops keys whose producer was forgotten: a retry after that would be written again, so
    /// the key must not pretend to protect it.
    pub(super) fn forget_idle_idempotency_keys(&mut self) {
        let producers = &self.producers;
        self.idempotency_keys.retain(|_, k| producers.contains_key(&k.producer_id));
    }
}
