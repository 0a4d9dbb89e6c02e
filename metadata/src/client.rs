//! How an agent in its own process reaches the metadata service: a local mirror of the state,
//! fed by a change stream from any metadata node, and proposals sent to any node (which forwards
//! them to the leader).
//!
//! The mirror applies the same commands, in the same order, with the same deterministic
//! [`State::apply`], so it is an exact copy as of its applied index. Fetches read it without
//! asking the metadata service; a proposal returns only once the mirror has applied it, so an
//! agent always reads its own writes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::command::{Command, Outcome};
use crate::groups::{GroupError, GroupRequest, GroupResponse};
use crate::locks::RwLockRecovery;
use crate::node::NodeError;
use crate::raft::network::{
    CallError, ConnectionPool, NotAfter, Request, Response, dial_with_hello, read_frame_in, write_frame,
};
use crate::state::{State, StoredState};

/// How long a proposal keeps trying nodes before it is answered as unavailable.
const PROPOSE_DEADLINE: Duration = Duration::from_secs(15);
/// Time one node has to answer a proposal (it may be forwarding through an election).
const PROPOSE_CALL_TIMEOUT: Duration = Duration::from_secs(12);
/// A segment commit not answered by its node within this long is sent to the next node too.
const HEDGE_AFTER: Duration = Duration::from_secs(2);
/// Pause before the mirror reconnects after losing its stream.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(200);
/// Time to open a change stream's connection (TCP and, with mutual TLS, the handshake).
const FOLLOW_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A proposal's index not mirrored after this long means the mirror's node is behind (cut off
/// from the leader, or paused): the mirror moves to another node.
const MIRROR_BEHIND_AFTER: Duration = Duration::from_secs(2);
/// How long a newly followed node has to send its copy of the state before it may be judged
/// behind.
const FIRST_COPY_PATIENCE: Duration = Duration::from_secs(10);
/// How long [`RemoteMetadata::catch_up`] may take.
const CATCH_UP_DEADLINE: Duration = Duration::from_secs(5);
/// Time one node has to answer a status request.
const STATUS_CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between asking the nodes behind for their applied index again.
const APPLIED_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How long `connect` waits for the first copy of the state.
const FIRST_COPY_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote metadata service and this process's mirror of its state; cheap to clone.
#[derive(Clone, Debug)]
pub struct RemoteMetadata {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    addrs: Vec<String>,
    /// The node proposals go to first: the last one that answered.
    preferred: AtomicUsize,
    state: Arc<RwLock<State>>,
    applied: watch::Sender<u64>,
    pool: ConnectionPool,
    /// Tells the mirror its node is behind, so it follows another.
    behind: tokio::sync::Notify,
}

impl RemoteMetadata {
    /// Starts mirroring from the nodes at `addrs` and waits for the first copy of the state.
    pub async fn connect(addrs: Vec<String>) -> Result<Self, NodeError> {
        if addrs.is_empty() {
            return Err(NodeError::Unavailable("no metadata addresses given".into()));
        }
        let (applied, mut first) = watch::channel(0);
        let inner = Arc::new(Inner {
            addrs,
            preferred: AtomicUsize::new(0),
            state: Default::default(),
            applied,
            pool: ConnectionPool::default(),
            behind: tokio::sync::Notify::new(),
        });
        let (copied, mut got_copy) = watch::channel(false);
        tokio::spawn(mirror(inner.clone(), copied));
        tokio::time::timeout(FIRST_COPY_TIMEOUT, got_copy.wait_for(|c| *c))
            .await
            .map_err(|_| NodeError::Unavailable("no metadata node sent its state in time".into()))?
            .map_err(|_| NodeError::Unavailable("mirror stopped".into()))?;
        first.borrow_and_update();
        Ok(Self { inner })
    }

    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read_recovered()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.applied.subscribe()
    }

    /// Sends `command` to a metadata node and returns its outcome once the mirror has applied it.
    pub async fn propose(&self, command: Command) -> Result<Outcome, NodeError> {
        let deadline = Instant::now() + PROPOSE_DEADLINE;
        let count = self.inner.addrs.len();
        // Both are safe to apply twice: segment commits are deduplicated by key, a heartbeat only
        // moves a time forward. A heartbeat held 12 s by a paused node would let the agent drop
        // out of Metadata, and clients drop their connections to it.
        let hedge = matches!(
            command,
            Command::CommitSegment(_)
                | Command::AgentHeartbeat { .. }
                | Command::AgentHeartbeatWithProfile { .. }
                | Command::AgentHeartbeatWithPeer { .. }
        );
        let mut attempt = self.inner.preferred.load(Ordering::Relaxed);
        let mut last_error = String::from("no metadata node answered");
        while Instant::now() < deadline {
            // Each copy expires when this loop stops waiting for it, so no copy is applied after
            // the next one is sent or after the caller is answered.
            let wait = deadline.saturating_duration_since(Instant::now()).min(PROPOSE_CALL_TIMEOUT);
            let not_after = NotAfter::within(wait);
            let request = match crate::tls::relayed_operator_token() {
                Some(token) if command.operator_only() => {
                    Request::ProposeAsOperator(command.clone(), not_after, token.to_owned())
                }
                _ => Request::ProposeAnywhere(command.clone(), not_after),
            };
            let (index, answer) = self.call_proposal(attempt, &request, hedge, wait).await;
            match answer {
                Ok(Response::ProposeAnywhere(Ok((response, log_index)))) => {
                    self.inner.preferred.store(index, Ordering::Relaxed);
                    if response.0.is_ok()
                        && let Err(e) = self.wait_applied(log_index, deadline).await
                    {
                        // The command is committed: answering it as failed would make a producer
                        // send again what is already in the log. Only read-your-writes is late.
                        tracing::warn!(log_index, error = %e, "committed, but the mirror has not caught up yet");
                    }
                    return response.0.map_err(NodeError::Rejected);
                }
                Ok(Response::ProposeAnywhere(Err(e))) => last_error = e,
                Ok(_) => last_error = "metadata node answered with the wrong response kind".into(),
                Err(e) => last_error = e.to_string(),
            }
            attempt += 1;
            if attempt.is_multiple_of(count) {
                tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
            }
        }
        Err(NodeError::Unavailable(last_error))
    }

    /// Sends a consumer group request to a metadata node (which forwards it to the leader) and
    /// returns its answer once the mirror has applied what it wrote.
    pub async fn group_request(&self, request: GroupRequest) -> Result<GroupResponse, GroupError> {
        let timeout = crate::raft::network::group_call_timeout(&request);
        let count = self.inner.addrs.len();
        let first = self.inner.preferred.load(Ordering::Relaxed);
        let mut last_error = String::from("no metadata node answered");
        for attempt in first..first + count {
            let index = attempt % count;
            let addr = &self.inner.addrs[index];
            let call = Request::Group(request.clone(), NotAfter::within(timeout));
            match self.inner.pool.call(addr, &call, timeout).await {
                Ok(Response::Group(Ok((response, log_index)))) => {
                    self.inner.preferred.store(index, Ordering::Relaxed);
                    let deadline = Instant::now() + PROPOSE_DEADLINE;
                    self.wait_applied(log_index, deadline)
                        .await
                        .map_err(|e| GroupError::CoordinatorNotAvailable(e.to_string()))?;
                    return Ok(response);
                }
                Ok(Response::Group(Err(e))) => return Err(e),
                Ok(_) => last_error = format!("{addr} answered with the wrong response kind"),
                // Share work is not idempotent (acquiring twice locks twice): once it may have
                // reached a node, the client asks again rather than this agent.
                Err(e) if matches!(request, GroupRequest::ShareWork(_)) && !e.is_connect() => {
                    return Err(GroupError::CoordinatorNotAvailable(e.to_string()));
                }
                Err(e) => last_error = e.to_string(),
            }
        }
        Err(GroupError::CoordinatorNotAvailable(last_error))
    }

    /// Waits until the mirror holds everything the metadata leader had applied when asked, so
    /// what it shows afterwards is as fresh as the leader's state (for answers a stale mirror
    /// would get wrong, such as the end of a partition's log).
    pub async fn catch_up(&self) -> Result<(), NodeError> {
        let deadline = Instant::now() + CATCH_UP_DEADLINE;
        let count = self.inner.addrs.len();
        let first = self.inner.preferred.load(Ordering::Relaxed);
        let mut last_error = String::from("no metadata node answered");
        for attempt in first..first + count {
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                break;
            }
            let addr = &self.inner.addrs[attempt % count];
            match self.inner.pool.call(addr, &Request::ReadIndex, wait).await {
                Ok(Response::ReadIndex(Ok(index))) => return self.wait_applied(index, deadline).await,
                Ok(Response::ReadIndex(Err(e))) => last_error = e,
                Ok(_) => last_error = format!("{addr} answered with the wrong response kind"),
                Err(e) => last_error = e.to_string(),
            }
        }
        Err(NodeError::Unavailable(last_error))
    }

    /// Waits until every metadata node has applied what this mirror has, or `patience` runs
    /// out; returns the nodes still behind (or unreachable) then. Change streams push each
    /// applied command at once, so afterwards every agent's mirror, whichever node it follows,
    /// shows it within a round trip.
    pub async fn wait_applied_by_every_node(&self, patience: Duration) -> Vec<String> {
        let index = *self.inner.applied.borrow();
        let deadline = Instant::now() + patience;
        let mut behind: Vec<&String> = self.inner.addrs.iter().collect();
        loop {
            let mut still = Vec::new();
            for addr in behind {
                let wait = deadline.saturating_duration_since(Instant::now()).min(STATUS_CALL_TIMEOUT);
                match self.inner.pool.call(addr, &Request::Status, wait).await {
                    Ok(Response::Status(status)) if status.applied_index.unwrap_or(0) >= index => {}
                    _ => still.push(addr),
                }
            }
            behind = still;
            if behind.is_empty() || Instant::now() >= deadline {
                return behind.into_iter().cloned().collect();
            }
            tokio::time::sleep(APPLIED_POLL_INTERVAL).await;
        }
    }

    /// Sends a proposal to node `attempt % count`. With `hedge`, a node that has not answered
    /// within [`HEDGE_AFTER`] (paused, or cut off from the others) is raced by the next one,
    /// and the first answer wins: only for commands whose second application does no harm
    /// (segment commits, deduplicated by object key; heartbeats).
    async fn call_proposal(
        &self,
        attempt: usize,
        request: &Request,
        hedge: bool,
        timeout: Duration,
    ) -> (usize, Result<Response, CallError>) {
        let count = self.inner.addrs.len();
        let call = |i: usize| self.inner.pool.call(&self.inner.addrs[i], request, timeout);
        let first = attempt % count;
        let primary = call(first);
        if !hedge || count < 2 {
            return (first, primary.await);
        }
        tokio::pin!(primary);
        tokio::select! {
            answer = &mut primary => return (first, answer),
            () = tokio::time::sleep(HEDGE_AFTER) => {}
        }
        let second = (first + 1) % count;
        let backup = call(second);
        tokio::select! {
            answer = primary => (first, answer),
            answer = backup => (second, answer),
        }
    }

    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), NodeError> {
        let mut applied = self.subscribe();
        loop {
            let wait = deadline.saturating_duration_since(Instant::now()).min(MIRROR_BEHIND_AFTER);
            match tokio::time::timeout(wait, applied.wait_for(|a| *a >= index)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(_)) => return Err(NodeError::Unavailable("the local mirror stopped".into())),
                Err(_) if Instant::now() < deadline => self.inner.behind.notify_waiters(),
                Err(_) => {
                    return Err(NodeError::Unavailable(format!(
                        "the local mirror did not reach index {index} in time"
                    )));
                }
            }
        }
    }
}

/// Adds a part of a state copy to `parts`; the copy, decoded off the runtime's threads, once the
/// last part is in. Parts that disagree on the total, or overrun it, end the stream.
async fn take_copy_part(
    parts: &mut Option<(u64, Vec<u8>)>,
    total: u64,
    bytes: Vec<u8>,
    format: u32,
) -> std::io::Result<Option<StoredState>> {
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    if total > crate::raft::network::STATE_COPY_BYTES_MAX {
        return Err(invalid(format!("a state copy of {total} bytes")));
    }
    let (expected, received) = parts.get_or_insert_with(|| (total, Vec::new()));
    if *expected != total || (received.len() + bytes.len()) as u64 > total {
        return Err(invalid(format!("state copy parts of {total} bytes after {expected}")));
    }
    received.extend_from_slice(&bytes);
    if (received.len() as u64) < total {
        return Ok(None);
    }
    let Some((_, whole)) = parts.take() else { return Ok(None) };
    let copy = tokio::task::spawn_blocking(move || crate::state::stored::decode_state_copy(&whole, format))
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| invalid(format!("a state copy: {e}")))?;
    Ok(Some(copy))
}

/// Keeps the mirror current: subscribes to one node after another, forever (until the process
/// exits), resynchronizing from a fresh copy whenever a stream breaks.
async fn mirror(inner: Arc<Inner>, copied: watch::Sender<bool>) {
    let mut next = 0usize;
    loop {
        let addr = inner.addrs[next % inner.addrs.len()].clone();
        next += 1;
        match follow(&inner, &addr, &copied).await {
            Ok(()) => tracing::info!(%addr, "metadata change stream closed"),
            Err(e) => tracing::info!(%addr, error = %e, "metadata change stream failed"),
        }
        tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
    }
}

async fn follow(inner: &Inner, addr: &str, copied: &watch::Sender<bool>) -> std::io::Result<()> {
    let (mut stream, node) = dial_with_hello(addr, FOLLOW_CONNECT_TIMEOUT).await?;
    if node.format > crate::FORMAT_VERSION {
        // Its states and commands may not decode, or decode wrong: follow another node.
        tracing::error!(
            %addr, node_format = node.format, node_release = %node.release, format = crate::FORMAT_VERSION,
            "this agent cannot read the metadata format the node writes: upgrade agents before metadata nodes"
        );
        return Ok(());
    }
    write_frame(&mut stream, &Request::Subscribe).await?;
    let mut subscribed = Instant::now();
    let mut first_copy: Option<Instant> = None;
    // A copy arriving in parts: its total length and the bytes so far.
    let mut parts: Option<(u64, Vec<u8>)> = None;
    loop {
        // A node is judged behind only once it had time to send its copy and then its changes:
        // every proposal waiting on the mirror reports "behind", and moving on at each report
        // would restart the copy (megabytes for a large state) again and again and never catch up.
        let judged_from = match first_copy {
            Some(at) => at + MIRROR_BEHIND_AFTER,
            None => subscribed + FIRST_COPY_PATIENCE,
        };
        let behind = async {
            tokio::time::sleep_until(judged_from.into()).await;
            inner.behind.notified().await;
        };
        let frame = tokio::select! {
            frame = read_frame_in::<Response>(&mut stream, node.format) => frame?,
            () = behind => {
                tracing::info!(%addr, "metadata node behind the proposals; following another");
                return Ok(());
            }
        };
        let frame = match frame {
            Some(Response::StateCopyPart { total, bytes }) => {
                // Patience runs from the last part: a large copy takes as long as it takes.
                subscribed = Instant::now();
                match take_copy_part(&mut parts, total, bytes, node.format).await? {
                    Some(copy) => Some(Response::StateCopy(Box::new(copy))),
                    None => continue,
                }
            }
            other => other,
        };
        if first_copy.is_none() && matches!(frame, Some(Response::StateCopy(_))) {
            first_copy = Some(Instant::now());
        }
        let Some(response) = frame else { break };
        let applied_index = {
            let mut state = inner.state.write_recovered();
            match response {
                // Every node's state is a prefix of one committed history: a copy older than the
                // mirror (from a lagging node) is skipped, and so are the changes the mirror has.
                Response::StateCopy(copy) => {
                    let copy = State::from(*copy);
                    if copy.version() >= state.version() {
                        *state = copy;
                    }
                }
                // A rebuilt cluster restarts its log indexes: the restore replaces the mirror.
                Response::Change(index, command @ Command::RestoreState(_)) => {
                    *state = State::default();
                    let _ = state.apply(index, command);
                }
                Response::Change(index, command) if index > state.applied_index => {
                    // Outcomes were returned to the proposer by the metadata node.
                    let _ = state.apply(index, command);
                }
                Response::Change(..) => {}
                _ => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "unexpected frame on a change stream",
                    ));
                }
            }
            state.applied_index
        };
        inner.applied.send_replace(applied_index);
        copied.send_replace(true);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_state() -> State {
        let mut state = State::default();
        let _ = state.apply(1, Command::InitCluster { cluster_id: "parts".into() });
        let create = Command::CreateTopic {
            name: "t".into(),
            topic_id: uuid::Uuid::from_u128(7),
            partition_count: 300,
            configs: Default::default(),
        };
        let _ = state.apply(2, create);
        state
    }

    /// A copy split in parts is whole again after its last part, and only then.
    #[tokio::test]
    async fn a_state_copy_in_parts_is_whole_after_its_last_part() {
        let state = a_state();
        let encoded = postcard::to_stdvec(&StoredState::from(state.clone())).expect("encode");
        let total = encoded.len() as u64;
        let mut parts = None;
        let pieces: Vec<&[u8]> = encoded.chunks(encoded.len() / 3 + 1).collect();
        assert_eq!(pieces.len(), 3);
        for (n, piece) in pieces.iter().enumerate() {
            let got = take_copy_part(&mut parts, total, piece.to_vec(), crate::FORMAT_VERSION).await.expect("a part");
            match got {
                Some(copy) => assert!(n == 2 && State::from(copy) == state, "whole after the last part only"),
                None => assert!(n < 2, "the last part completes the copy"),
            }
        }
        assert!(parts.is_none(), "nothing kept after the copy");
    }

    /// Parts that overrun their total, change it, or announce more than a copy may hold end the
    /// stream instead of growing without bound.
    #[tokio::test]
    async fn state_copy_parts_that_disagree_or_overrun_are_refused() {
        let mut parts = None;
        assert!(take_copy_part(&mut parts, 4, vec![1, 2, 3, 4, 5], 0).await.is_err(), "an overrun");
        let mut parts = None;
        assert!(take_copy_part(&mut parts, 8, vec![1, 2], 0).await.expect("a part").is_none());
        assert!(take_copy_part(&mut parts, 9, vec![3], 0).await.is_err(), "another total");
        let mut parts = None;
        let too_large = crate::raft::network::STATE_COPY_BYTES_MAX + 1;
        assert!(take_copy_part(&mut parts, too_large, vec![0], 0).await.is_err(), "past the bound");
    }
}
