//! Share sessions (KIP-932) on this agent: for each (share group, member), the partitions its
//! ShareFetch requests read and the epoch its next request must carry. Epoch 0 opens a session,
//! each request moves it on by one (wrapping to 1), -1 closes it. A client that reaches another
//! agent gets SHARE_SESSION_NOT_FOUND and opens a new session there.
//!
//! The session also keeps what the records' states still need to hear from this agent: offsets
//! acquired without a deliverable record (markers, aborted or compacted records), archived with
//! the member's next request.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use floe_metadata::TopicId;
use floe_metadata::locks::MutexRecovery;

/// Sessions one agent keeps (Kafka's `group.share.max.share.sessions` default).
pub const SHARE_SESSIONS_MAX: usize = 2_000;
/// Sessions one tenant may hold on one agent, so a tenant cannot take them all.
pub const TENANT_SHARE_SESSIONS_MAX: usize = SHARE_SESSIONS_MAX / 4;
/// Partitions one session may read, and partitions one request may acknowledge: together with
/// the gaps and unsent records of a request, well within one `ShareUpdate`'s operations.
pub const SHARE_SESSION_PARTITIONS_MAX: usize = 1_000;
/// Gap ranges a session keeps owed; past it they are dropped (their locks expire instead).
const OWED_GAPS_MAX: usize = 10_000;
/// A session idle this long may be evicted to make room for a new one.
const SESSION_IDLE_EVICT: Duration = Duration::from_secs(120);

pub type SharePartitionRef = (TopicId, i32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareSessionError {
    #[error("share session not found")]
    NotFound,
    #[error("share session epoch {found} is not the expected one")]
    InvalidEpoch { found: i32 },
    #[error("the agent holds {SHARE_SESSIONS_MAX} share sessions, or the tenant its share of them")]
    LimitReached,
    #[error("a share session reads at most {SHARE_SESSION_PARTITIONS_MAX} partitions")]
    TooManyPartitions,
}

#[derive(Debug)]
struct Session {
    /// Who opened it (tenant and user): a session answers no one else.
    owner: String,
    next_epoch: i32,
    partitions: BTreeSet<SharePartitionRef>,
    /// Offsets acquired by this member without a record to deliver, to archive.
    gaps: Vec<(SharePartitionRef, i64, i64)>,
    last_used: Instant,
}

/// What a request may do in its session.
#[derive(Debug, Default)]
pub struct SessionTurn {
    /// The partitions to read (empty when the session closes).
    pub partitions: Vec<SharePartitionRef>,
    pub closing: bool,
    /// Gaps left by earlier requests, to archive now.
    pub gaps: Vec<(SharePartitionRef, i64, i64)>,
}

#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: Mutex<HashMap<(String, String), Session>>,
}

/// `into` with `added`, unless that is more than a session may read (counted as it is built, so a
/// huge request costs no more than the limit).
fn bounded(
    added: impl Iterator<Item = SharePartitionRef>,
    mut into: BTreeSet<SharePartitionRef>,
) -> Result<BTreeSet<SharePartitionRef>, ShareSessionError> {
    for p in added {
        into.insert(p);
        if into.len() > SHARE_SESSION_PARTITIONS_MAX {
            return Err(ShareSessionError::TooManyPartitions);
        }
    }
    Ok(into)
}

fn tenant_of(owner: &str) -> &str {
    owner.split_once('/').map_or("", |(tenant, _)| tenant)
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

impl ShareSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Session>> {
        self.sessions.lock_recovered()
    }

    /// Moves the member's session on by one request with `epoch` from `owner` (`TENANT/USER`,
    /// empty without SASL), adding `added` partitions and dropping `forgotten` ones. Nothing
    /// changes when it fails.
    pub fn turn(
        &self,
        owner: &str,
        (group_id, member_id): (&str, &str),
        epoch: i32,
        added: impl IntoIterator<Item = SharePartitionRef>,
        forgotten: impl IntoIterator<Item = SharePartitionRef>,
    ) -> Result<SessionTurn, ShareSessionError> {
        let key = (group_id.to_owned(), member_id.to_owned());
        let mut sessions = self.lock();
        let now = Instant::now();
        // Another caller's session is not found, and not replaced.
        if sessions.get(&key).is_some_and(|s| s.owner != owner) {
            return Err(ShareSessionError::NotFound);
        }
        if epoch == 0 {
            if !sessions.contains_key(&key) {
                let tenant = tenant_of(owner);
                let full = |sessions: &HashMap<(String, String), Session>| {
                    sessions.len() >= SHARE_SESSIONS_MAX
                        || (!tenant.is_empty()
                            && sessions.values().filter(|s| tenant_of(&s.owner) == tenant).count()
                                >= TENANT_SHARE_SESSIONS_MAX)
                };
                if full(&sessions) {
                    sessions.retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE_EVICT);
                    if full(&sessions) {
                        return Err(ShareSessionError::LimitReached);
                    }
                }
            }
            let partitions = bounded(added.into_iter(), BTreeSet::new())?;
            // A new session replaces the old one; its gaps are still owed.
            let gaps = sessions.remove(&key).map(|s| s.gaps).unwrap_or_default();
            let turn = SessionTurn { partitions: partitions.iter().copied().collect(), closing: false, gaps };
            let owner = owner.to_owned();
            sessions.insert(key, Session { owner, next_epoch: 1, partitions, gaps: Vec::new(), last_used: now });
            return Ok(turn);
        }
        let Some(session) = sessions.get_mut(&key) else { return Err(ShareSessionError::NotFound) };
        if epoch == -1 {
            let session = sessions.remove(&key).ok_or(ShareSessionError::NotFound)?;
            return Ok(SessionTurn { partitions: Vec::new(), closing: true, gaps: session.gaps });
        }
        if epoch != session.next_epoch {
            return Err(ShareSessionError::InvalidEpoch { found: epoch });
        }
        let mut partitions = bounded(added.into_iter(), session.partitions.clone())?;
        for p in forgotten {
            partitions.remove(&p);
        }
        session.partitions = partitions;
        session.next_epoch = next(epoch);
        session.last_used = now;
        Ok(SessionTurn {
            partitions: session.partitions.iter().copied().collect(),
            closing: false,
            gaps: std::mem::take(&mut session.gaps),
        })
    }

    /// Keeps gaps to archive with the member's next request (dropped if its session is gone:
    /// their locks then expire and they are archived on a later delivery).
    pub fn owe_gaps(&self, group_id: &str, member_id: &str, gaps: Vec<(SharePartitionRef, i64, i64)>) {
        if gaps.is_empty() {
            return;
        }
        if let Some(session) = self.lock().get_mut(&(group_id.to_owned(), member_id.to_owned())) {
            let room = OWED_GAPS_MAX.saturating_sub(session.gaps.len());
            session.gaps.extend(gaps.into_iter().take(room));
        }
    }

    /// Forgets a session the coordinator does not know the member of.
    pub fn forget(&self, group_id: &str, member_id: &str) {
        self.lock().remove(&(group_id.to_owned(), member_id.to_owned()));
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: i32) -> SharePartitionRef {
        (TopicId::from_u128(1), n)
    }

    #[test]
    fn epochs_open_move_on_and_close_a_session() {
        let sessions = ShareSessions::default();
        let gm = ("g", "m");
        assert_eq!(sessions.turn("alice", gm, 1, [], []).err(), Some(ShareSessionError::NotFound));
        let turn = sessions.turn("alice", gm, 0, [p(0)], []).expect("open");
        assert_eq!(turn.partitions, [p(0)]);
        let turn = sessions.turn("alice", gm, 1, [p(1)], []).expect("epoch 1");
        assert_eq!(turn.partitions, [p(0), p(1)]);
        assert_eq!(sessions.turn("alice", gm, 1, [], []).err(), Some(ShareSessionError::InvalidEpoch { found: 1 }));
        let turn = sessions.turn("alice", gm, 2, [], [p(0)]).expect("epoch 2");
        assert_eq!(turn.partitions, [p(1)]);
        sessions.owe_gaps("g", "m", vec![(p(1), 5, 6)]);
        let turn = sessions.turn("alice", gm, -1, [], []).expect("close");
        assert!(turn.closing && turn.gaps == [(p(1), 5, 6)]);
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_session_answers_only_its_owner_and_stays_whole_when_a_request_is_refused() {
        let sessions = ShareSessions::default();
        let gm = ("g", "m");
        sessions.turn("alice", gm, 0, [p(0)], []).expect("open");
        for epoch in [0, 1, -1] {
            assert_eq!(sessions.turn("mallory", gm, epoch, [p(9)], []).err(), Some(ShareSessionError::NotFound));
        }
        let too_many = (0..=i32::try_from(SHARE_SESSION_PARTITIONS_MAX).expect("small")).map(p);
        assert_eq!(sessions.turn("alice", gm, 1, too_many, []).err(), Some(ShareSessionError::TooManyPartitions));
        let turn = sessions.turn("alice", gm, 1, [], []).expect("epoch 1 still expected");
        assert_eq!(turn.partitions, [p(0)]);
    }

    #[test]
    fn a_tenant_holds_at_most_its_share_of_the_sessions() {
        let sessions = ShareSessions::default();
        for m in 0..TENANT_SHARE_SESSIONS_MAX {
            sessions.turn("acme/alice", ("g", &m.to_string()), 0, [p(0)], []).expect("within the share");
        }
        let over = sessions.turn("acme/bob", ("g", "one-more"), 0, [p(0)], []);
        assert_eq!(over.err(), Some(ShareSessionError::LimitReached));
        sessions.turn("globex/carol", ("g", "other"), 0, [p(0)], []).expect("another tenant is not held back");
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next(i32::MAX), 1);
        assert_eq!(next(1), 2);
    }
}
