//! The metadata protocol between metadata nodes, agents and `floe admin`: length-prefixed
//! postcard frames over TCP (mutual TLS when [`crate::tls`] is installed), one request and one
//! response at a time per connection.
//!
//! Frame: `payload_bytes: u32 BE | payload`, at most [`FRAME_BYTES_MAX`]. The payload is a
//! postcard-encoded [`Request`] or [`Response`]; both grow by adding variants at the end, and
//! [`PROTOCOL_VERSION`] counts those changes.
//!
//! Versions: a connection may open with [`Request::Hello`], which names the asker's protocol and
//! metadata format and is answered with the node's. A process of protocol 0 cannot read a Hello
//! and closes the connection on it; the asker then knows it as [`Hello::before_hello`]. A reader
//! reads every older format (`state::stored`) and writes only its own, so in a change stream
//! the agent decodes in the node's format when that is older, and a node refuses a subscriber
//! that reads only older formats than it writes (it logs both versions): upgrade agents before
//! metadata nodes when the format changes.

use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{CommandResponse, NodeId, TypeConfig};
use crate::command::Command;
use crate::groups::{GroupError, GroupRequest, GroupResponse};
use crate::locks::MutexRecovery;
use crate::node::{ClusterStatus, MetadataNode};
use crate::state::StoredState;
use crate::tls::{MetadataStream, Role};

/// Largest frame either side accepts: a snapshot chunk (3 MiB by default) or a large commit.
pub const FRAME_BYTES_MAX: usize = 128 * 1024 * 1024;
/// Open metadata-protocol connections a node serves at once: peers, and each agent's pooled
/// proposal connections and change stream. Past it new connections are closed at once.
pub const SERVED_CONNECTIONS_MAX: usize = 4096;
/// Time to establish a connection to a peer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time a forwarded proposal may take on the leader.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

/// The metadata protocol's version. 0: no version exchange; 1: [`Request::Hello`]; 2: state
/// copies in parts ([`Response::StateCopyPart`]).
pub const PROTOCOL_VERSION: u32 = 2;
/// A change stream's state copy is sent in parts of this size to subscribers of protocol 2 and
/// on: a state of a million partitions with their index and offsets passes one frame's bound.
const STATE_COPY_PART_BYTES: usize = 16 * 1024 * 1024;
/// The largest state copy a subscriber takes in parts.
pub(crate) const STATE_COPY_BYTES_MAX: u64 = 4 * 1024 * 1024 * 1024;
/// The newest metadata format a process of protocol 0 may write.
const FORMAT_BEFORE_HELLO: u32 = 6;
/// Longest release string a Hello carries.
const RELEASE_BYTES_MAX: usize = 64;

/// What a process speaks: the metadata protocol, the newest metadata format it reads and
/// writes ([`crate::FORMAT_VERSION`]) and its release, for people.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u32,
    pub format: u32,
    pub release: String,
}

impl Hello {
    /// This process.
    pub fn this_process() -> Self {
        Self {
            protocol: PROTOCOL_VERSION,
            format: crate::FORMAT_VERSION,
            release: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// A process that does not know Hello.
    pub fn before_hello() -> Self {
        Self { protocol: 0, format: FORMAT_BEFORE_HELLO, release: "before metadata protocol 1".to_owned() }
    }

    /// Why a change stream in this node's format cannot be read by `subscriber`, if it cannot.
    fn cannot_serve(&self, subscriber: &Hello) -> Option<String> {
        (subscriber.format < self.format).then(|| {
            format!(
                "the subscriber reads metadata formats up to {} ({}) and this node writes format {} ({}): \
                 upgrade agents before metadata nodes",
                subscriber.format, subscriber.release, self.format, self.release
            )
        })
    }
}

/// A request to a metadata node.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A proposal forwarded by a follower; applied only if this node leads.
    Propose(Command, NotAfter),
    Status,
    /// A proposal from an agent: forwarded to the leader by whichever node receives it.
    ProposeAnywhere(Command, NotAfter),
    /// Turns the connection into a change stream: a [`Response::StateCopy`], then a
    /// [`Response::Change`] per applied command, and a new copy whenever the stream must resync.
    Subscribe,
    /// Adds a voter at the given address (leader only).
    AddVoter(NodeId, String),
    /// Removes a voter (leader only).
    RemoveVoter(NodeId),
    /// A consumer group request from an agent: handled by the leader, forwarded there by
    /// whichever node receives it.
    Group(GroupRequest, NotAfter),
    /// A group request forwarded by a follower; answered NOT_COORDINATOR unless this node leads.
    GroupAsLeader(GroupRequest, NotAfter),
    /// The log index a linearizable read must wait for: the leader confirms it still leads and
    /// answers its applied index; a follower asks the leader.
    ReadIndex,
    /// A read index asked by a follower; refused unless this node leads.
    ReadIndexAsLeader,
    /// A [`Request::ProposeAnywhere`] of an operator-only command by an agent serving the HTTP
    /// operator API, with the operator token it was given (checked by the node).
    ProposeAsOperator(Command, NotAfter, String),
    /// The node's wall clock (`floe doctor` compares clocks).
    Clock,
    /// The asker's versions; answered with the node's ([`Response::Hello`]). Protocol 1.
    Hello(Hello),
}

impl Request {
    /// Whether a connection holding `role` may send this request. Peers replicate, vote and
    /// forward what they checked themselves; agents propose data-plane commands, ask group
    /// requests and follow the change stream; operators may also propose anything and change
    /// the voters. Operator-only commands from an agent need the operator token.
    fn allowed(&self, role: &Role, operator_token: impl Fn(&str) -> bool) -> bool {
        match (role, self) {
            (_, Request::Status | Request::Clock | Request::Hello(_)) => true,
            (
                Role::Peer(_),
                Request::AppendEntries(_)
                | Request::Vote(_)
                | Request::InstallSnapshot(_)
                | Request::Propose(..)
                | Request::GroupAsLeader(..)
                | Request::ReadIndexAsLeader
                | Request::Subscribe,
            ) => true,
            (Role::Peer(_), _) => false,
            (_, Request::Subscribe | Request::Group(..) | Request::ReadIndex) => true,
            (Role::Operator(_), Request::ProposeAnywhere(..) | Request::AddVoter(..) | Request::RemoveVoter(_)) => true,
            (Role::Agent(_), Request::ProposeAnywhere(command, _)) => !command.operator_only(),
            (Role::Operator(_) | Role::Agent(_), Request::ProposeAsOperator(_, _, token)) => operator_token(token),
            _ => false,
        }
    }

    /// What a refused request is answered, where its response can say so; `None`: the
    /// connection is closed instead.
    fn refusal(&self, role: &Role) -> Option<Response> {
        let why = format!("the metadata port does not allow this to {role:?}");
        match self {
            Request::ProposeAnywhere(..) | Request::ProposeAsOperator(..) => Some(Response::ProposeAnywhere(Ok((
                CommandResponse(Err(crate::command::CommandError::NotAuthorized(why))),
                0,
            )))),
            Request::AddVoter(..) | Request::RemoveVoter(_) => Some(Response::Membership(Err(why))),
            _ => None,
        }
    }
}

/// When a request's sender stops waiting for it (wall clock, ms since the epoch). A copy that
/// arrives later (held in a TCP queue through a partition, or read by a process resumed from a
/// pause) is refused before it reaches the state: applied after its sender moved on, it could
/// land after requests the client sent since, e.g. a stale EndTxn committing the transaction
/// that began after it. `None`: the sender waits as long as it takes.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct NotAfter(pub(crate) Option<i64>);

impl NotAfter {
    /// `wait` from now.
    pub(crate) fn within(wait: Duration) -> Self {
        Self(Some(crate::now_ms().saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX))))
    }

    pub(crate) fn passed(self) -> bool {
        self.0.is_some_and(|at| crate::now_ms() > at)
    }
}

/// The answer to a [`Request`], variant for variant.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Propose(ProposeReply),
    Status(ClusterStatus),
    /// The outcome and log index of a [`Request::ProposeAnywhere`], or why it is unknown.
    ProposeAnywhere(Result<(CommandResponse, u64), String>),
    StateCopy(#[serde(deserialize_with = "crate::state::stored::restored_state")] Box<StoredState>),
    Change(u64, Command),
    /// The result of a membership change.
    Membership(Result<(), String>),
    /// The answer to a group request and the log index of its last write.
    Group(Result<(GroupResponse, u64), GroupError>),
    /// The answer to [`Request::ReadIndex`] and [`Request::ReadIndexAsLeader`].
    ReadIndex(Result<u64, String>),
    /// The answer to [`Request::Clock`]: ms since the epoch.
    Clock(i64),
    /// The answer to [`Request::Hello`].
    Hello(Hello),
    /// A part of a change stream's state copy (protocol 2): `total` bytes of the postcard
    /// encoding of the [`StoredState`] a [`Response::StateCopy`] would carry, split in order.
    StateCopyPart {
        total: u64,
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
}

/// How a leader answered a forwarded proposal.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ProposeReply {
    Applied(CommandResponse, u64),
    /// The node is not (or no longer) the leader; the proposer looks again.
    NotLeader,
}

/// Why a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("talking to {addr}: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("{addr} answered with the wrong response kind")]
    Mismatch { addr: String },
}

impl CallError {
    /// Whether the request never left this process.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

pub(crate) async fn write_frame(stream: &mut (impl AsyncWrite + Unpin), value: &impl Serialize) -> std::io::Result<()> {
    let payload = postcard::to_stdvec(value).map_err(std::io::Error::other)?;
    if payload.len() > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame over the limit"));
    }
    let mut frame = Vec::with_capacity(payload.len() + 4);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    stream.write_all(&frame).await
}

pub(crate) async fn read_frame<T: DeserializeOwned>(
    stream: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<Option<T>> {
    read_frame_in(stream, crate::FORMAT_VERSION).await
}

/// [`read_frame`] of a frame whose states and commands were written in metadata format `format`.
pub(crate) async fn read_frame_in<T: DeserializeOwned>(
    stream: &mut (impl AsyncRead + Unpin),
    format: u32,
) -> std::io::Result<Option<T>> {
    let length = match stream.read_u32().await {
        Ok(length) => length as usize,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    };
    if length > FRAME_BYTES_MAX {
        // A TLS alert or handshake record (0x15 or 0x16, then version 3.x) read as a length.
        let why = if matches!(length >> 24, 0x15 | 0x16) && (length >> 16) & 0xff == 3 {
            "the other side speaks TLS: this process needs --metadata-tls-cert, --metadata-tls-key and \
             --metadata-tls-ca"
                .to_owned()
        } else {
            format!("frame of {length} bytes")
        };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    }
    let mut payload = Vec::with_capacity(length.min(1 << 20));
    (&mut *stream).take(length as u64).read_to_end(&mut payload).await?;
    if payload.len() != length {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    // 0: today's format.
    let format = if format >= crate::FORMAT_VERSION { 0 } else { format };
    crate::state::stored::decoding(format, || postcard::from_bytes(&payload))
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Serves the metadata protocol until `stop` turns true.
pub(crate) async fn serve(listener: TcpListener, node: MetadataNode, mut stop: tokio::sync::watch::Receiver<bool>) {
    let connections = std::sync::Arc::new(tokio::sync::Semaphore::new(SERVED_CONNECTIONS_MAX));
    let handshakes = super::handshakes::Handshakes::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "metadata accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let node = node.clone();
        let mut stop = stop.clone();
        let (connections, handshakes) = (connections.clone(), handshakes.clone());
        tokio::spawn(async move {
            // Without a certificate of the cluster's CA the handshake fails: nothing is read. A
            // connection takes one of the node's served slots only once it is authenticated, so
            // handshakes that never finish hold only their own bounded places.
            let (mut stream, role) = match crate::tls::installed() {
                None => (MetadataStream::Plain(stream), None),
                Some(tls) => {
                    let mut ticket = handshakes.begin(peer.ip());
                    let accepted = tokio::select! {
                        accepted = tls.accept(stream) => accepted,
                        _ = &mut ticket.evicted => {
                            tracing::debug!(%peer, "metadata connection closed: handshake given up for a newer one");
                            return;
                        }
                    };
                    match accepted {
                        Ok((stream, role)) => (stream, Some(role)),
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "metadata connection refused: TLS handshake");
                            return;
                        }
                    }
                }
            };
            let Ok(_permit) = connections.try_acquire_owned() else {
                tracing::warn!(%peer, limit = SERVED_CONNECTIONS_MAX, "metadata connection refused: too many open");
                return;
            };
            let mut theirs = Hello::before_hello();
            loop {
                let read = tokio::select! {
                    read = read_frame::<Request>(&mut stream) => read,
                    _ = stop.wait_for(|s| *s) => return,
                };
                let request = match read {
                    Ok(Some(request)) => request,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "closing metadata connection");
                        return;
                    }
                };
                if let Some(role) = &role
                    && !request.allowed(role, crate::tls::operator_token_matches)
                {
                    tracing::warn!(%peer, ?role, "metadata request refused by its role");
                    match request.refusal(role) {
                        Some(refusal) if write_frame(&mut stream, &refusal).await.is_ok() => continue,
                        _ => return,
                    }
                }
                let response = match request {
                    Request::AppendEntries(r) => Response::AppendEntries(node.raft.append_entries(r).await),
                    Request::Vote(r) => Response::Vote(node.raft.vote(r).await),
                    Request::InstallSnapshot(r) => Response::InstallSnapshot(node.raft.install_snapshot(r).await),
                    Request::Propose(command, not_after) => {
                        Response::Propose(node.propose_as_leader(command, not_after).await)
                    }
                    Request::Status => Response::Status(node.status()),
                    Request::Clock => Response::Clock(crate::now_ms()),
                    Request::Hello(mut hello) => {
                        hello.release.truncate(hello.release.floor_char_boundary(RELEASE_BYTES_MAX));
                        theirs = hello;
                        Response::Hello(Hello::this_process())
                    }
                    Request::ProposeAnywhere(command, not_after)
                    | Request::ProposeAsOperator(command, not_after, _) => {
                        Response::ProposeAnywhere(match node.propose_before(command, not_after).await {
                            Ok((outcome, index)) => Ok((CommandResponse(Ok(outcome)), index)),
                            Err(crate::NodeError::Rejected(e)) => Ok((CommandResponse(Err(e)), 0)),
                            Err(crate::NodeError::Unavailable(e)) => Err(e),
                        })
                    }
                    Request::AddVoter(id, addr) => Response::Membership(node.add_voter(id, addr).await),
                    Request::RemoveVoter(id) => Response::Membership(node.remove_voter(id).await),
                    Request::Group(request, not_after) => {
                        Response::Group(node.group_request_before(request, not_after).await)
                    }
                    Request::GroupAsLeader(request, not_after) => Response::Group(match node.leader_term() {
                        Some(_) => node.group_request_before(request, not_after).await,
                        None => Err(GroupError::NotCoordinator),
                    }),
                    Request::ReadIndex => Response::ReadIndex(node.read_index().await.map_err(|e| e.to_string())),
                    Request::ReadIndexAsLeader => Response::ReadIndex(match node.leader_term() {
                        Some(_) => node.read_index().await.map_err(|e| e.to_string()),
                        None => Err("not the metadata leader".into()),
                    }),
                    Request::Subscribe => {
                        if let Some(why) = Hello::this_process().cannot_serve(&theirs) {
                            tracing::error!(%peer, "change stream refused: {why}");
                            return;
                        }
                        let in_parts = theirs.protocol >= 2;
                        if let Err(e) = stream_changes(&mut stream, &node, &mut stop, in_parts).await {
                            tracing::debug!(%peer, error = %e, "change stream ended");
                        }
                        return;
                    }
                };
                if write_frame(&mut stream, &response).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Sends `copy` as [`Response::StateCopyPart`]s, encoded off the runtime's threads.
async fn write_state_copy_in_parts(stream: &mut MetadataStream, copy: crate::State) -> std::io::Result<()> {
    let encoded = tokio::task::spawn_blocking(move || postcard::to_stdvec(&crate::state::stored::AsStored(&copy)))
        .await
        .map_err(std::io::Error::other)?
        .map_err(std::io::Error::other)?;
    let total = encoded.len() as u64;
    for bytes in encoded.chunks(STATE_COPY_PART_BYTES) {
        write_frame(stream, &Response::StateCopyPart { total, bytes: bytes.to_vec() }).await?;
    }
    Ok(())
}

/// Sends a copy of the state, then every applied command after it, until the peer goes away.
async fn stream_changes(
    stream: &mut MetadataStream,
    node: &MetadataNode,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    in_parts: bool,
) -> std::io::Result<()> {
    use crate::raft::state_machine::Change;
    use tokio::sync::broadcast::error::RecvError;
    'resync: loop {
        // Subscribe before copying, so nothing applied in between is missed; commands already in
        // the copy are skipped by index.
        let mut changes = node.changes();
        let copy = node.read().clone();
        let copied_index = copy.applied_index;
        if in_parts {
            write_state_copy_in_parts(stream, copy).await?;
        } else {
            write_frame(stream, &Response::StateCopy(Box::new(copy.into()))).await?;
        }
        loop {
            let change = tokio::select! {
                change = changes.recv() => change,
                _ = stop.wait_for(|s| *s) => return Ok(()),
            };
            match change {
                Ok(Change::Applied(index, command)) if index > copied_index => {
                    write_frame(stream, &Response::Change(index, (*command).clone())).await?;
                }
                Ok(Change::Applied(..)) => {}
                Ok(Change::Reset) | Err(RecvError::Lagged(_)) => continue 'resync,
                Err(RecvError::Closed) => return Ok(()),
            }
        }
    }
}

/// One connection to a peer, opened lazily and dropped on any error.
#[derive(Debug)]
pub(crate) struct PeerClient {
    addr: String,
    stream: Option<MetadataStream>,
}

impl PeerClient {
    pub(crate) fn new(addr: String) -> Self {
        Self { addr, stream: None }
    }

    /// One request and its response. Cancel-safe: the connection is taken out for the exchange and
    /// put back only when the response was read, so a call dropped half-way (openraft times out
    /// replication calls itself) leaves no unread response behind. Kept, such a response would be
    /// read as the answer to the next request: a stale AppendEntries success would make the
    /// leader count entries as replicated that the follower never received.
    pub(crate) async fn call(&mut self, request: &Request, timeout: Duration) -> Result<Response, CallError> {
        let addr = self.addr.clone();
        let io = |source| CallError::Io { addr: addr.clone(), source };
        let mut stream = match self.stream.take() {
            Some(stream) => stream,
            None => crate::tls::dial(&self.addr, CONNECT_TIMEOUT)
                .await
                .map_err(|source| CallError::Connect { addr: self.addr.clone(), source })?,
        };
        let exchange = async {
            write_frame(&mut stream, request).await?;
            read_frame::<Response>(&mut stream)
                .await?
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(response)) => {
                self.stream = Some(stream);
                Ok(response)
            }
            Ok(Err(e)) => Err(io(e)),
            Err(_) => Err(io(std::io::ErrorKind::TimedOut.into())),
        }
    }
}

/// Idle connections to other nodes, reused across calls so a proposal costs no TCP handshake.
#[derive(Debug, Default)]
pub(crate) struct ConnectionPool {
    idle: std::sync::Mutex<std::collections::HashMap<String, Vec<PeerClient>>>,
}

/// Idle connections kept per address; more are closed when returned.
const POOL_IDLE_PER_ADDR_MAX: usize = 64;

impl ConnectionPool {
    /// Calls `addr` on a pooled connection (or a new one); the connection is kept only if the
    /// call succeeded.
    pub(crate) async fn call(&self, addr: &str, request: &Request, timeout: Duration) -> Result<Response, CallError> {
        let pooled = self.idle.lock_recovered().get_mut(addr).and_then(Vec::pop);
        let mut client = pooled.unwrap_or_else(|| PeerClient::new(addr.to_owned()));
        let response = client.call(request, timeout).await?;
        let mut idle = self.idle.lock_recovered();
        let slot = idle.entry(addr.to_owned()).or_default();
        if slot.len() < POOL_IDLE_PER_ADDR_MAX {
            slot.push(client);
        }
        Ok(response)
    }
}

/// How long a group request may take on the leader: a JoinGroup waits for the rebalance (up to
/// the member's rebalance timeout), a SyncGroup for the leader's assignment.
pub(crate) fn group_call_timeout(request: &GroupRequest) -> Duration {
    const MARGIN: Duration = Duration::from_secs(30);
    match request {
        GroupRequest::Join(join) => {
            Duration::from_millis(u64::try_from(join.rebalance_timeout_ms).unwrap_or(0)).min(Duration::from_secs(1800))
                + MARGIN
        }
        GroupRequest::Sync(_) => Duration::from_secs(1800) + MARGIN,
        // A read the leader answers within its quorum check; a paused leader must not hold a
        // consumer's resume for long, the client asks again.
        GroupRequest::FetchOffsets { .. } => Duration::from_secs(5),
        _ => MARGIN,
    }
}

/// Sends a proposal to the node at `addr` (the leader, as far as we know).
pub(crate) async fn forward_proposal(
    pool: &ConnectionPool,
    addr: &str,
    command: &Command,
    not_after: NotAfter,
) -> Result<ProposeReply, CallError> {
    match pool.call(addr, &Request::Propose(command.clone(), not_after), FORWARD_TIMEOUT).await? {
        Response::Propose(reply) => Ok(reply),
        _ => Err(CallError::Mismatch { addr: addr.to_owned() }),
    }
}

/// Opens a connection to the node at `addr` and exchanges Hellos: the connection and the node's
/// versions. A node of protocol 0 closes the connection on a Hello (it cannot read it); it is
/// then dialled again and known as [`Hello::before_hello`].
pub(crate) async fn dial_with_hello(addr: &str, timeout: Duration) -> std::io::Result<(MetadataStream, Hello)> {
    let mut stream = crate::tls::dial(addr, timeout).await?;
    write_frame(&mut stream, &Request::Hello(Hello::this_process())).await?;
    let answer = tokio::time::timeout(timeout, read_frame::<Response>(&mut stream))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
    match answer {
        Ok(Some(Response::Hello(hello))) => Ok((stream, hello)),
        Ok(Some(_)) => {
            Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a Hello answered with another response"))
        }
        Ok(None) => Ok((crate::tls::dial(addr, timeout).await?, Hello::before_hello())),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Ok((crate::tls::dial(addr, timeout).await?, Hello::before_hello()))
        }
        Err(e) => Err(e),
    }
}

/// The versions of the node at `addr`.
pub async fn fetch_hello(addr: &str) -> Result<Hello, String> {
    dial_with_hello(addr, Duration::from_secs(5)).await.map(|(_, hello)| hello).map_err(|e| format!("{addr}: {e}"))
}

/// Asks the node at `addr` for its cluster status. A connection that could not be made in time is
/// tried again twice: under a flood of connections a node may take a while to reach an operator's
/// handshake, and `floe admin` is what an operator reaches for then.
pub async fn fetch_status(addr: &str) -> Result<ClusterStatus, String> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut client = PeerClient::new(addr.to_owned());
        match client.call(&Request::Status, Duration::from_secs(5)).await {
            Ok(Response::Status(status)) => return Ok(status),
            Ok(_) => return Err(format!("{addr} answered with the wrong response kind")),
            Err(e @ CallError::Connect { .. }) if attempts < 3 => {
                tracing::info!(error = %e, "metadata node not reached; trying again");
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The clock of the node at `addr` and the round trip of asking it: the node read its clock
/// somewhere within that round trip.
pub async fn fetch_clock(addr: &str) -> Result<(i64, Duration), String> {
    let mut client = PeerClient::new(addr.to_owned());
    let sent = std::time::Instant::now();
    match client.call(&Request::Clock, Duration::from_secs(5)).await.map_err(|e| e.to_string())? {
        Response::Clock(ms) => Ok((ms, sent.elapsed())),
        _ => Err(format!("{addr} answered with the wrong response kind")),
    }
}

/// Changes the voter set through the leader found from the node at `addr`. Tried again for up
/// to [`MEMBERSHIP_CHANGE_DEADLINE`] while the leader is unknown or moves (a node just elected,
/// or one that stepped down, answers that it would have to forward).
pub async fn change_membership(
    addr: &str,
    add: Option<(NodeId, String)>,
    remove: Option<NodeId>,
) -> Result<(), String> {
    let request = match (add, remove) {
        (Some((id, node_addr)), None) => Request::AddVoter(id, node_addr),
        (None, Some(id)) => Request::RemoveVoter(id),
        _ => return Err("give exactly one of add or remove".into()),
    };
    let deadline = tokio::time::Instant::now() + MEMBERSHIP_CHANGE_DEADLINE;
    loop {
        match change_membership_once(addr, &request).await {
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "membership change not done yet; trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            done => return done,
        }
    }
}

/// How long [`change_membership`] keeps trying.
const MEMBERSHIP_CHANGE_DEADLINE: Duration = Duration::from_secs(15);

async fn change_membership_once(addr: &str, request: &Request) -> Result<(), String> {
    let status = fetch_status(addr).await?;
    let leader = status.leader.ok_or("the cluster has no leader right now")?;
    let leader_addr = status.members.get(&leader).ok_or("the leader is not in the member list")?.clone();
    let mut client = PeerClient::new(leader_addr.clone());
    match client.call(request, Duration::from_secs(60)).await.map_err(|e| e.to_string())? {
        Response::Membership(result) => result,
        _ => Err(format!("{leader_addr} answered with the wrong response kind")),
    }
}

/// Creates peer connections for openraft.
#[derive(Debug)]
pub(crate) struct Network;

/// openraft's handle on one peer.
#[derive(Debug)]
pub(crate) struct PeerConnection {
    target: NodeId,
    client: PeerClient,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        PeerConnection { target, client: PeerClient::new(node.addr.clone()) }
    }
}

fn transport_error<E: std::error::Error>(error: CallError) -> RPCError<NodeId, BasicNode, E> {
    match &error {
        CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&error)),
        _ => RPCError::Network(NetworkError::new(&error)),
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.client.call(&Request::AppendEntries(rpc), option.hard_ttl()).await.map_err(transport_error)? {
            Response::AppendEntries(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(transport_error(CallError::Mismatch { addr: self.client.addr.clone() })),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        match self.client.call(&Request::InstallSnapshot(rpc), option.hard_ttl()).await.map_err(transport_error)? {
            Response::InstallSnapshot(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(transport_error(CallError::Mismatch { addr: self.client.addr.clone() })),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.client.call(&Request::Vote(rpc), option.hard_ttl()).await.map_err(transport_error)? {
            Response::Vote(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(transport_error(CallError::Mismatch { addr: self.client.addr.clone() })),
        }
    }
}

#[cfg(test)]
mod tests;
