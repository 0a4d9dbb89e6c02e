//! Incremental fetch sessions (KIP-227): a consumer of many partitions names only the partitions
//! whose fetch position changed, and is answered only for the partitions that have something to
//! say (records, an error, or a moved high watermark, last stable or log start offset).
//!
//! Sessions are expanded and filtered at the edge of the connection: [`FetchSessions::begin`]
//! turns an incremental request into the session's whole partition list before authorization,
//! scoping and the Fetch handler see it, and [`FetchSessions::finish`] drops the unchanged
//! partitions from the answer. Everything in between sees an ordinary full fetch, so ACLs are
//! checked on every partition of every fetch, as Kafka does.
//!
//! A session also remembers what its answers last said of each partition, keyed as the state
//! names it ([`ToldPartitions`], written by the Fetch handler after authorization and scoping):
//! a partition the client has read to its end and that has not moved since is left out of the
//! read (it would be filtered out of the answer anyway), so at 10,000 partitions a fetch reads
//! the few that moved, not all of them. It is still waited on, and still authorized: the
//! authorizer sees the whole expanded request.
//!
//! A session by topic id also leaves out of the request the partitions its last answers left out
//! as told and unmoved (*quiet* ones), so a fetch at 10,000 partitions costs the few that moved,
//! not a loop over all of them. A partition stays quiet only while nothing could change what it
//! would be answered: the client names it again, the kept waiter (which must watch every quiet
//! partition) tells it moved, the session's partitions or its waiter change, or ACLs change
//! (the state's journal counts those, [`floe_metadata::ChangedPartitions`]) — each makes it read
//! again. A quiet partition that moves during a long poll is read by that poll
//! ([`SessionView::take_quiet`]). Sessions by name keep the whole request.
//!
//! A session is soft state on one agent: it belongs to one connection (and tenant) and dies with
//! it. Losing one costs the client a single full fetch, never a position, since fetch offsets
//! always come from the client.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use floe_metadata::locks::MutexRecovery;
use floe_metadata::{ChangedPartitions, JournalPosition, TopicId};
use indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::fetch::wakeups::{Mark, Waiter};
use crate::metrics;

/// The first Fetch version with sessions.
const SESSIONS_VERSION_MIN: i16 = 7;
/// The first Fetch version naming topics by id.
const TOPIC_IDS_VERSION_MIN: i16 = 13;
/// A request's epoch asking for a sessionless fetch (closing the named session, if any).
const FINAL_EPOCH: i32 = -1;
/// A request's epoch asking for a full fetch that opens a new session.
const INITIAL_EPOCH: i32 = 0;
/// The isolation level reading committed records only.
const READ_COMMITTED: i8 = 1;

/// Bounds of the session cache, each with the reason for its value.
#[derive(Clone, Copy, Debug)]
pub struct FetchSessionBounds {
    /// Sessions on this agent (Kafka's `max.incremental.fetch.session.cache.slots`); 0 keeps none.
    pub slots: usize,
    /// Partitions cached over all sessions: about 150 bytes each, so 150 MiB at most.
    pub partitions: usize,
    /// Sessions one tenant may hold: a quarter of the agent, so one tenant cannot take them all.
    pub tenant_slots: usize,
    /// Partitions one tenant's sessions may cache: a quarter of the agent's.
    pub tenant_partitions: usize,
    /// Sessions one connection may hold: a client keeps one per broker; a further one replaces
    /// the connection's least recently used.
    pub connection_slots: usize,
    /// Partitions one session may hold: what one request may name anyway.
    pub session_partitions: usize,
    /// How long a session must have gone unused before another may evict it (Kafka's
    /// `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`); a live session is not taken away sooner.
    pub stale_after: Duration,
}

impl FetchSessionBounds {
    /// The bounds for an agent with `slots` sessions; the rest follow from it.
    pub fn with_slots(slots: usize) -> Self {
        let partitions = 1_000_000;
        Self {
            slots,
            partitions,
            tenant_slots: (slots / 4).max(1),
            tenant_partitions: partitions / 4,
            connection_slots: 2,
            session_partitions: crate::limits::REQUEST_PARTITION_COUNT_MAX,
            stale_after: Duration::from_secs(120),
        }
    }
}

impl Default for FetchSessionBounds {
    fn default() -> Self {
        Self::with_slots(1_000)
    }
}

/// Why an incremental fetch was refused; the client starts a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchSessionError {
    #[error("no fetch session {0} on this connection")]
    NotFound(i32),
    #[error("fetch session epoch {got}, expected {expected}")]
    InvalidEpoch { got: i32, expected: i32 },
    #[error("the fetch session was opened with topic {} and is continued with topic {}", names(*.opened_with_ids), names(!*.opened_with_ids))]
    TopicIdUsage { opened_with_ids: bool },
}

fn names(ids: bool) -> &'static str {
    if ids { "ids" } else { "names" }
}

impl FetchSessionError {
    /// The label of `floe_fetch_session_errors_total`.
    fn label(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "FETCH_SESSION_ID_NOT_FOUND",
            Self::InvalidEpoch { .. } => "INVALID_FETCH_SESSION_EPOCH",
            Self::TopicIdUsage { .. } => "FETCH_SESSION_TOPIC_ID_ERROR",
        }
    }
}

/// A partition's key in a session: by topic name below Fetch v13, by topic id from v13.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TopicKey {
    Name(StrBytes),
    Id(Uuid),
}

type Key = (TopicKey, i32);

/// One partition of a session: what the client last asked for, and what it was last told.
#[derive(Clone, Debug)]
struct Cached {
    topic: TopicName,
    topic_id: Uuid,
    request: FetchPartition,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// Returned records in the answer being finished: goes to the back of the session.
    to_back: bool,
    /// Left out of the requests the handler sees (see the module's comment).
    quiet: bool,
}

impl Cached {
    fn new(topic: &FetchTopic, request: FetchPartition) -> Self {
        // -1: not answered yet, so the next answer includes it.
        let (high_watermark, last_stable_offset, log_start_offset) = (-1, -1, -1);
        Self {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            request,
            high_watermark,
            last_stable_offset,
            log_start_offset,
            to_back: false,
            quiet: false,
        }
    }

    /// Whether `answer` must reach the client, remembering what it says.
    fn must_respond(&mut self, answer: &PartitionData) -> bool {
        let records = answer.records.as_ref().is_some_and(|r| !r.is_empty());
        let moved = self.high_watermark != answer.high_watermark
            || self.last_stable_offset != answer.last_stable_offset
            || self.log_start_offset != answer.log_start_offset;
        (self.high_watermark, self.last_stable_offset, self.log_start_offset) =
            (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset);
        let error = answer.error_code != 0;
        if error {
            // Sent again once the error clears.
            self.high_watermark = -1;
        }
        records || moved || error || answer.preferred_read_replica.0 >= 0 || answer.diverging_epoch.epoch >= 0
    }
}

struct Session {
    id: i32,
    connection: u64,
    tenant: Option<Arc<str>>,
    uses_topic_ids: bool,
    state: Mutex<SessionState>,
    told: ToldPartitions,
}

/// What a session's answers last said of each partition the handler read (its high watermark,
/// last stable and log start offsets, leader epoch), by the state's topic id. After an answer
/// the client knows exactly these: a partition left out of it was left out because it had not
/// changed. Cleared whenever the session's partitions change, so a partition added again is
/// answered again. Cheap to clone (clones share the map).
#[derive(Clone, Debug, Default)]
pub struct ToldPartitions(Arc<Mutex<Told>>);

impl ToldPartitions {
    /// The map, taken back from poison: each change is one assignment.
    pub fn lock(&self) -> MutexGuard<'_, Told> {
        self.0.lock_recovered()
    }
}

/// By topic, then partition number: a fetch looks a topic up once and each of its partitions by
/// index (a hash lookup per partition cost more than the read it spared at 10,000 partitions).
#[derive(Debug, Default)]
pub struct Told {
    topics: rustc_hash::FxHashMap<TopicId, Vec<Option<Mark>>>,
    /// Slots over all topics: a vector is as long as the highest partition number told.
    slots: usize,
    /// The session's partitions registered to be woken, kept from one fetch to the next: a
    /// consumer long-polls the same partitions fetch after fetch, and registering 10,000 of them
    /// for each cost a tenth of the agent. Dropped with the session or when its partitions change.
    waiter: Option<Arc<Waiter>>,
    /// Changes whenever `waiter` does: quiet partitions were set under one waiter, which alone
    /// is known to watch them.
    generation: u64,
}

impl Told {
    /// What was told of the partitions of `topic_id`, by partition number.
    pub fn topic(&self, topic_id: TopicId) -> &[Option<Mark>] {
        self.topics.get(&topic_id).map_or(&[], Vec::as_slice)
    }

    /// Records what an answer told of a partition (`None` after an error), unless that needs more
    /// than `slots_max` slots in all: a session naming the last partition of many large topics
    /// would otherwise cost their partition counts, not its own size. A partition not recorded
    /// is read each fetch, as without this memory.
    pub fn set(&mut self, topic_id: TopicId, partition: i32, mark: Option<Mark>, slots_max: usize) {
        let Ok(index) = usize::try_from(partition) else { return };
        let told = self.topics.entry(topic_id).or_default();
        if index >= told.len() {
            let added = index + 1 - told.len();
            if mark.is_none() || self.slots + added > slots_max {
                return;
            }
            told.resize(index + 1, None);
            self.slots += added;
        }
        told[index] = mark;
    }

    /// The session's kept waiter, if a fetch registered one.
    pub fn waiter(&self) -> Option<Arc<Waiter>> {
        self.waiter.clone()
    }

    /// Keeps `waiter` for the session's next fetches, in place of the one kept before.
    pub fn keep_waiter(&mut self, waiter: Arc<Waiter>) {
        self.waiter = Some(waiter);
        self.generation += 1;
    }

    /// Makes the session's next fetch read every partition: moves of quiet partitions were
    /// taken and could not be acted on (too many to list).
    pub fn wake_quiet(&mut self) {
        self.generation += 1;
    }

    fn clear(&mut self) {
        *self = Self { generation: self.generation + 1, ..Self::default() };
    }
}

struct SessionState {
    /// The epoch the next incremental request must carry.
    epoch: i32,
    /// Evicted or closed: a fetch still in flight is answered without it.
    closed: bool,
    partitions: IndexMap<Key, Cached>,
    /// Quiet partitions.
    quiet: usize,
    /// The kept waiter's generation ([`Told`]) the quiet partitions were set under.
    quiet_generation: u64,
    /// Where the state's journal was at the last fetch's start: ACLs changed since make every
    /// partition be authorized (read) again.
    journal_read_to: Option<JournalPosition>,
}

impl SessionState {
    /// Makes every quiet partition read again.
    fn wake_all(&mut self) {
        if self.quiet > 0 {
            self.partitions.values_mut().for_each(|cached| cached.quiet = false);
            self.quiet = 0;
        }
    }

    /// Makes the partition at `key` read again; its request if it was quiet.
    fn wake(&mut self, key: &Key) -> Option<&FetchPartition> {
        let cached = self.partitions.get_mut(key).filter(|cached| cached.quiet)?;
        cached.quiet = false;
        self.quiet -= 1;
        Some(&cached.request)
    }
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, SessionState> {
        // The state is valid after any panic: each change is a single assignment or map operation.
        self.state.lock_recovered()
    }

    fn key(&self, topic: &TopicName, topic_id: Uuid, partition: i32) -> Key {
        let topic = if self.uses_topic_ids { TopicKey::Id(topic_id) } else { TopicKey::Name(topic.0.clone()) };
        (topic, partition)
    }

    /// Whether `key` is the session's key of this partition, compared without building one.
    fn is_key(&self, key: &Key, topic: &TopicName, topic_id: Uuid, partition: i32) -> bool {
        key.1 == partition
            && match &key.0 {
                TopicKey::Id(id) => self.uses_topic_ids && *id == topic_id,
                TopicKey::Name(name) => !self.uses_topic_ids && *name == topic.0,
            }
    }
}

/// What [`FetchSessions::finish`] needs to answer a fetch that [`FetchSessions::begin`] took.
pub struct Ticket {
    session: Arc<Session>,
    full: bool,
    /// Whether the fetch reads committed records only (up to the last stable offset).
    read_committed: bool,
    /// The session's epoch after this fetch began: a later fetch began if it moved on.
    epoch: i32,
    /// The kept waiter, when the request leaves quiet partitions out.
    kept: Option<Arc<Waiter>>,
    /// What the handler's answer left out as told and unmoved (by topic id and partition).
    left_out: Arc<Mutex<Vec<(TopicId, i32)>>>,
    /// The session's partitions.
    partitions: usize,
}

impl Ticket {
    /// What the Fetch handler sees of the session.
    pub fn view(&self) -> SessionView {
        SessionView {
            session: self.session.clone(),
            kept: self.kept.clone(),
            left_out: self.left_out.clone(),
            partitions: self.partitions,
        }
    }
}

/// A session as the Fetch handler sees it: what its answers told, the partitions its request
/// leaves out as quiet, and where to say which partitions the answer left out.
#[derive(Clone)]
pub struct SessionView {
    session: Arc<Session>,
    kept: Option<Arc<Waiter>>,
    left_out: Arc<Mutex<Vec<(TopicId, i32)>>>,
    partitions: usize,
}

impl std::fmt::Debug for SessionView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionView").field("session", &self.session.id).field("quiet", &self.kept.is_some()).finish()
    }
}

impl SessionView {
    /// What the session's answers told the client, for the handler to read and write.
    pub fn told(&self) -> &ToldPartitions {
        &self.session.told
    }

    /// The waiter that watches every partition the request leaves out as quiet; `None` when it
    /// leaves none out. The handler must wait on it (and must not replace it), and read a
    /// partition it says moved though the request does not name it ([`Self::take_quiet`]).
    pub fn quiet_watcher(&self) -> Option<&Arc<Waiter>> {
        self.kept.as_ref()
    }

    /// Partitions in the session, named in the request or not.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// The request of a quiet partition that moved, to be read by this fetch; it is no longer
    /// quiet. `None` if it is not quiet (a later fetch took it, or it left the session).
    pub fn take_quiet(&self, topic_id: TopicId, partition: i32) -> Option<FetchPartition> {
        if !self.session.uses_topic_ids {
            return None;
        }
        self.session.lock().wake(&(TopicKey::Id(topic_id), partition)).cloned()
    }

    /// The partitions (by the state's topic id) that the answer sent left out as told and
    /// unmoved: they may be quiet from the next fetch on.
    pub fn left_out(&self, partitions: Vec<(TopicId, i32)>) {
        *self.left_out.lock_recovered() = partitions;
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("session", &self.session.id).field("full", &self.full).finish()
    }
}

/// Sessions and partitions counted against a bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Usage {
    sessions: usize,
    partitions: usize,
}

struct Entry {
    session: Arc<Session>,
    created: Instant,
    last_used: Instant,
    partitions: usize,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<i32, Entry>,
    by_connection: HashMap<u64, Vec<i32>>,
    by_tenant: HashMap<Option<Arc<str>>, Usage>,
    total: Usage,
    /// Sessions by last use, oldest first.
    last_used: BTreeSet<(Instant, i32)>,
    ids_drawn: u64,
}

/// Why a session left the cache, for `floe_fetch_sessions_evicted_total`.
#[derive(Clone, Copy)]
enum Eviction {
    /// Unused for `stale_after`, to make room.
    Stale,
    /// Older than `stale_after` and smaller than the session that took its place.
    Size,
    /// Its connection opened one more session than it may hold.
    Connection,
}

impl Eviction {
    fn label(self) -> &'static str {
        match self {
            Self::Stale => "stale",
            Self::Size => "size",
            Self::Connection => "connection",
        }
    }
}

/// The fetch sessions of one agent.
pub struct FetchSessions {
    bounds: FetchSessionBounds,
    cache: Mutex<Cache>,
    next_connection: AtomicU64,
    ids: RandomState,
}

impl std::fmt::Debug for FetchSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.lock().total;
        f.debug_struct("FetchSessions").field("bounds", &self.bounds).field("sessions", &total.sessions).finish()
    }
}

impl FetchSessions {
    pub fn new(bounds: FetchSessionBounds) -> Self {
        Self { bounds, cache: Mutex::default(), next_connection: AtomicU64::new(1), ids: RandomState::new() }
    }

    /// A number for a new connection, to own its sessions; give it back with
    /// [`Self::close_connection`].
    pub fn connection(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        // Every change keeps the counters and maps consistent before anything can panic.
        self.cache.lock_recovered()
    }

    /// Reads a Fetch's session fields. An incremental request is rewritten into the session's
    /// partition list, in session order, without its quiet partitions; a full one may open a
    /// session. `journal` is the state's, read now, before the request is authorized. `None`:
    /// answer without a session, as Kafka does before v7 or when it cannot keep one.
    pub fn begin(
        &self,
        connection: u64,
        tenant: Option<&str>,
        version: i16,
        request: &mut FetchRequest,
        journal: &ChangedPartitions,
        now: Instant,
    ) -> Result<Option<Ticket>, FetchSessionError> {
        if version < SESSIONS_VERSION_MIN {
            return Ok(None);
        }
        let (id, epoch) = (request.session_id, request.session_epoch);
        let read_committed = request.isolation_level == READ_COMMITTED;
        let mut began = match epoch {
            FINAL_EPOCH | INITIAL_EPOCH => {
                if id != 0 {
                    self.close_owned(id, connection);
                }
                if epoch == INITIAL_EPOCH && self.bounds.slots > 0 {
                    Ok(self.open(connection, tenant, version, request, now))
                } else {
                    Ok(None)
                }
            }
            _ => self.continue_session(connection, tenant, version, request, journal, now),
        };
        if let Ok(Some(ticket)) = &mut began {
            ticket.read_committed = read_committed;
        }
        let kind = match &began {
            Ok(None) => "sessionless",
            Ok(Some(ticket)) if ticket.full => "full",
            Ok(Some(_)) => "incremental",
            Err(e) => {
                metrics::FETCH_SESSION_ERRORS.with_label_values(&[e.label()]).inc();
                "refused"
            }
        };
        metrics::FETCH_REQUESTS.with_label_values(&[kind]).inc();
        began
    }

    /// Opens a session holding the full request's partitions, if the bounds allow one.
    fn open(
        &self,
        connection: u64,
        tenant: Option<&str>,
        version: i16,
        request: &FetchRequest,
        now: Instant,
    ) -> Option<Ticket> {
        let uses_topic_ids = version >= TOPIC_IDS_VERSION_MIN;
        let mut partitions = IndexMap::new();
        for topic in &request.topics {
            for p in &topic.partitions {
                let key =
                    if uses_topic_ids { TopicKey::Id(topic.topic_id) } else { TopicKey::Name(topic.topic.0.clone()) };
                partitions.insert((key, p.partition), Cached::new(topic, p.clone()));
            }
        }
        let size = partitions.len();
        if size == 0 || size > self.bounds.session_partitions {
            return None;
        }
        let tenant: Option<Arc<str>> = tenant.map(Arc::from);
        let mut cache = self.lock();
        if let Err(bound) = self.make_room(&mut cache, connection, &tenant, size, now) {
            metrics::FETCH_SESSIONS_REFUSED.with_label_values(&[bound]).inc();
            return None;
        }
        let id = loop {
            cache.ids_drawn += 1;
            // Random-looking ids in 1..=i32::MAX: nothing to learn from them, and a session is
            // only found from its own connection anyway.
            let drawn = (self.ids.hash_one(cache.ids_drawn) & 0x7fff_ffff) as i32;
            if drawn != 0 && !cache.entries.contains_key(&drawn) {
                break drawn;
            }
        };
        let state = Mutex::new(SessionState {
            epoch: 1,
            closed: false,
            partitions,
            quiet: 0,
            quiet_generation: 0,
            journal_read_to: None,
        });
        let told = ToldPartitions::default();
        let session = Arc::new(Session { id, connection, tenant: tenant.clone(), uses_topic_ids, state, told });
        let entry = Entry { session: session.clone(), created: now, last_used: now, partitions: size };
        cache.entries.insert(id, entry);
        cache.by_connection.entry(connection).or_default().push(id);
        cache.last_used.insert((now, id));
        let added = Usage { sessions: 1, partitions: size };
        cache.add(&tenant, added);
        metrics::FETCH_SESSIONS_CREATED.inc();
        Some(Ticket {
            session,
            full: true,
            read_committed: false,
            epoch: 1,
            kept: None,
            left_out: Arc::default(),
            partitions: size,
        })
    }

    /// Evicts what the bounds allow until a session of `size` partitions fits; otherwise names
    /// the bound that refuses it.
    fn make_room(
        &self,
        cache: &mut Cache,
        connection: u64,
        tenant: &Option<Arc<str>>,
        size: usize,
        now: Instant,
    ) -> Result<(), &'static str> {
        let b = &self.bounds;
        while cache.by_connection.get(&connection).map_or(0, Vec::len) >= b.connection_slots {
            let oldest = cache
                .by_connection
                .get(&connection)
                .into_iter()
                .flatten()
                .copied()
                .min_by_key(|id| cache.entries.get(id).map(|e| e.last_used));
            match oldest {
                Some(id) => cache.evict(id, Eviction::Connection),
                None => break,
            }
        }
        if tenant.is_some() {
            loop {
                let used = cache.by_tenant.get(tenant).copied().unwrap_or_default();
                if used.sessions < b.tenant_slots && used.partitions + size <= b.tenant_partitions {
                    break;
                }
                match self.stale(cache, Some(tenant), now).or_else(|| self.smaller(cache, tenant, size, now)) {
                    Some((id, why)) => cache.evict(id, why),
                    None => return Err("tenant"),
                }
            }
        }
        loop {
            let used = cache.total;
            if used.sessions < b.slots && used.partitions + size <= b.partitions {
                return Ok(());
            }
            match self.stale(cache, None, now).or_else(|| self.smaller(cache, tenant, size, now)) {
                Some((id, why)) => cache.evict(id, why),
                None => return Err(if used.sessions >= b.slots { "agent" } else { "partitions" }),
            }
        }
    }

    /// The least recently used session unused for `stale_after`, of `tenant` or of anyone.
    fn stale(&self, cache: &Cache, tenant: Option<&Option<Arc<str>>>, now: Instant) -> Option<(i32, Eviction)> {
        cache
            .last_used
            .iter()
            .take_while(|(used, _)| now.saturating_duration_since(*used) >= self.bounds.stale_after)
            .find(|(_, id)| tenant.is_none_or(|t| cache.entries.get(id).is_some_and(|e| &e.session.tenant == t)))
            .map(|&(_, id)| (id, Eviction::Stale))
    }

    /// Kafka's size rule, within `tenant`'s own sessions: the smallest session older than
    /// `stale_after`, if it is smaller than the one that wants its place.
    fn smaller(&self, cache: &Cache, tenant: &Option<Arc<str>>, size: usize, now: Instant) -> Option<(i32, Eviction)> {
        cache
            .entries
            .values()
            .filter(|e| &e.session.tenant == tenant)
            .filter(|e| now.saturating_duration_since(e.created) >= self.bounds.stale_after && e.partitions < size)
            .min_by_key(|e| (e.partitions, e.session.id))
            .map(|e| (e.session.id, Eviction::Size))
    }

    /// An incremental fetch: checks it against its session, applies its changes and rewrites it
    /// into the session's whole partition list.
    fn continue_session(
        &self,
        connection: u64,
        tenant: Option<&str>,
        version: i16,
        request: &mut FetchRequest,
        journal: &ChangedPartitions,
        now: Instant,
    ) -> Result<Option<Ticket>, FetchSessionError> {
        let id = request.session_id;
        let session = {
            let mut cache = self.lock();
            let owned = cache
                .entries
                .get(&id)
                .filter(|e| e.session.connection == connection && e.session.tenant.as_deref() == tenant);
            let Some(session) = owned.map(|e| e.session.clone()) else {
                return Err(FetchSessionError::NotFound(id));
            };
            cache.touch(id, now);
            session
        };
        let (size, epoch, kept) = {
            let mut guard = session.lock();
            let state = &mut *guard;
            if state.closed {
                return Err(FetchSessionError::NotFound(id));
            }
            if state.epoch != request.session_epoch {
                return Err(FetchSessionError::InvalidEpoch { got: request.session_epoch, expected: state.epoch });
            }
            if session.uses_topic_ids != (version >= TOPIC_IDS_VERSION_MIN) {
                return Err(FetchSessionError::TopicIdUsage { opened_with_ids: session.uses_topic_ids });
            }
            let mut changed = false;
            for topic in std::mem::take(&mut request.topics) {
                for p in &topic.partitions {
                    let key = session.key(&topic.topic, topic.topic_id, p.partition);
                    match state.partitions.get_mut(&key) {
                        Some(cached) => {
                            cached.request = p.clone();
                            // Its position moved: read again.
                            state.quiet -= usize::from(std::mem::take(&mut cached.quiet));
                        }
                        None => {
                            state.partitions.insert(key, Cached::new(&topic, p.clone()));
                            changed = true;
                        }
                    }
                }
            }
            let forgotten: HashSet<Key> = std::mem::take(&mut request.forgotten_topics_data)
                .iter()
                .flat_map(|t| t.partitions.iter().map(|&p| session.key(&t.topic, t.topic_id, p)))
                .collect();
            if !forgotten.is_empty() {
                state.partitions.retain(|key, _| !forgotten.contains(key));
                changed = true;
            }
            let mut told = session.told.lock();
            if changed {
                // A partition added again must be answered again: the told values are by the
                // state's ids, which the session's keys cannot be matched with here.
                told.clear();
            }
            // Every quiet partition is read again when they may no longer be what the client
            // was told: the waiter they were set under is gone, ACLs changed (the authorizer
            // sees only the request), or the kept waiter cannot list what moved.
            let kept = told.waiter();
            let mut wake_all = kept.is_none()
                || told.generation != state.quiet_generation
                || state.journal_read_to.is_none_or(|at| journal.access_changed_since(at));
            state.journal_read_to = Some(journal.position());
            // What moved since the last fetch took its moves is read again; a move from here on
            // wakes this fetch's long poll.
            match kept.as_ref().map(|kept| kept.take_moves()) {
                Some(Some(moved)) if session.uses_topic_ids && !wake_all => {
                    for (topic_id, partition) in moved {
                        state.wake(&(TopicKey::Id(topic_id), partition));
                    }
                }
                Some(None) => wake_all = true,
                _ => {}
            }
            drop(told);
            if wake_all {
                state.wake_all();
            }
            metrics::FETCH_PARTITION_READS.with_label_values(&["quiet"]).inc_by(state.quiet as u64);
            state.epoch = if state.epoch == i32::MAX { 1 } else { state.epoch + 1 };
            request.topics = expand(&state.partitions);
            (state.partitions.len(), state.epoch, kept.filter(|_| state.quiet > 0))
        };
        let mut cache = self.lock();
        if !cache.resize(&self.bounds, id, size) {
            // Empty, or past a bound: answered in full without the session, which the client
            // takes as the session's end and opens a new one.
            if size > 0 {
                metrics::FETCH_SESSIONS_REFUSED.with_label_values(&["partitions"]).inc();
            }
            cache.remove(id);
            return Ok(None);
        }
        let left_out = Arc::default();
        Ok(Some(Ticket { session, full: false, read_committed: false, epoch, kept, left_out, partitions: size }))
    }

    /// Answers a fetch [`Self::begin`] took: a full fetch names its new session, an
    /// incremental one keeps only the partitions the client must hear about.
    pub fn finish(&self, ticket: Ticket, response: &mut FetchResponse) {
        let session = &ticket.session;
        if response.error_code != 0 {
            if ticket.full {
                // The client never learns the new session's id.
                self.close_owned(session.id, session.connection);
            }
            return;
        }
        let mut state = session.lock();
        if state.closed {
            response.session_id = 0;
            return;
        }
        response.session_id = session.id;
        let mut omitted = 0u64;
        // Where in the session the partitions that returned records are, and whether the answer
        // left a partition with readable records without any: its next batch passed its
        // `partition_max_bytes` (only an answer's first batch may, KIP-74) or the answer's
        // `max_bytes` ran out before it.
        let (mut returned, mut short) = (Vec::new(), false);
        // The answer lists the session's partitions in the session's order (the request was
        // expanded from it), so each is nearly always the one after the last: no hashing.
        let mut cursor = 0usize;
        for topic in &mut response.responses {
            let (name, id) = (&topic.topic, topic.topic_id);
            topic.partitions.retain(|p| {
                let at = match state.partitions.get_index(cursor) {
                    Some((key, _)) if session.is_key(key, name, id, p.partition_index) => Some(cursor),
                    _ => state.partitions.get_index_of(&session.key(name, id, p.partition_index)),
                };
                let Some((at, (_, cached))) = at.and_then(|at| Some((at, state.partitions.get_index_mut(at)?))) else {
                    return true;
                };
                cursor = at + 1;
                let records = p.records.as_ref().is_some_and(|r| !r.is_empty());
                let readable_to = if ticket.read_committed { p.last_stable_offset } else { p.high_watermark };
                short |= !records
                    && p.error_code == 0
                    && p.preferred_read_replica.0 < 0
                    && readable_to > cached.request.fetch_offset;
                let respond = cached.must_respond(p);
                if records {
                    returned.push(at);
                }
                omitted += u64::from(!respond);
                respond || ticket.full
            });
        }
        if !ticket.full {
            response.responses.retain(|t| !t.partitions.is_empty());
            metrics::FETCH_SESSION_PARTITIONS_OMITTED.inc_by(omitted);
        }
        // Unless a later fetch began since, its own partitions' moves already taken.
        if session.uses_topic_ids && state.epoch == ticket.epoch {
            let left_out = std::mem::take(&mut *ticket.left_out.lock_recovered());
            if !left_out.is_empty() {
                mark_quiet(session, &mut state, left_out);
            }
        }
        // Partitions that returned records go to the back, in their order, as Kafka's do, so a
        // partition left short comes first in turn: taken out in one pass that keeps the
        // others' order, then appended. A move per partition shifted the whole session each
        // time, which at 10,000 partitions (a thousand returning records per answer) took 71 %
        // of the agent's CPU; a stable sort of the whole session still took 5 %, and this pass
        // 5 % too. An answer that left no partition short has starved none, so the order it
        // would change does not matter: those keep the session as it is.
        if short && !returned.is_empty() {
            for at in returned {
                if let Some((_, cached)) = state.partitions.get_index_mut(at) {
                    cached.to_back = true;
                }
            }
            let back: Vec<(Key, Cached)> = state.partitions.extract_if(.., |_, cached| cached.to_back).collect();
            state.partitions.extend(back.into_iter().map(|(key, cached)| (key, Cached { to_back: false, ..cached })));
        }
    }

    /// Closes session `id` if `connection` owns it.
    fn close_owned(&self, id: i32, connection: u64) {
        let mut cache = self.lock();
        if cache.entries.get(&id).is_some_and(|e| e.session.connection == connection) {
            cache.remove(id);
        }
    }

    /// Closes every session of a connection that has gone.
    pub fn close_connection(&self, connection: u64) {
        let mut cache = self.lock();
        for id in cache.by_connection.get(&connection).cloned().unwrap_or_default() {
            cache.remove(id);
        }
    }

    #[cfg(test)]
    fn usage(&self, tenant: Option<&str>) -> (Usage, Usage) {
        let cache = self.lock();
        let key: Option<Arc<str>> = tenant.map(Arc::from);
        (cache.total, cache.by_tenant.get(&key).copied().unwrap_or_default())
    }
}

/// Marks quiet the partitions an answer left out as told and unmoved that the kept waiter
/// watches (so that their next move is known); none without one.
fn mark_quiet(session: &Session, state: &mut SessionState, left_out: Vec<(TopicId, i32)>) {
    let told = session.told.lock();
    let Some(kept) = told.waiter.as_ref() else { return };
    if told.generation != state.quiet_generation {
        // Set under a waiter since replaced, which alone was known to watch them.
        state.wake_all();
        state.quiet_generation = told.generation;
    }
    for (topic_id, partition) in left_out {
        if !kept.watches_one(topic_id, partition) {
            continue;
        }
        if let Some(cached) = state.partitions.get_mut(&(TopicKey::Id(topic_id), partition))
            && !cached.quiet
        {
            cached.quiet = true;
            state.quiet += 1;
        }
    }
}

/// The session's partitions but the quiet ones as a request's topics, consecutive partitions
/// of a topic together.
fn expand(partitions: &IndexMap<Key, Cached>) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for ((topic, _), cached) in partitions.iter().filter(|(_, cached)| !cached.quiet) {
        let same = topics.last().is_some_and(|last| match topic {
            TopicKey::Id(id) => last.topic_id == *id,
            TopicKey::Name(name) => last.topic.0 == *name,
        });
        if !same {
            topics.push(FetchTopic::default().with_topic(cached.topic.clone()).with_topic_id(cached.topic_id));
        }
        if let Some(last) = topics.last_mut() {
            last.partitions.push(cached.request.clone());
        }
    }
    topics
}

impl Cache {
    fn add(&mut self, tenant: &Option<Arc<str>>, usage: Usage) {
        let t = self.by_tenant.entry(tenant.clone()).or_default();
        t.sessions += usage.sessions;
        t.partitions += usage.partitions;
        self.total.sessions += usage.sessions;
        self.total.partitions += usage.partitions;
        self.publish();
    }

    fn subtract(&mut self, tenant: &Option<Arc<str>>, usage: Usage) {
        if let Some(t) = self.by_tenant.get_mut(tenant) {
            t.sessions -= usage.sessions;
            t.partitions -= usage.partitions;
            if t.sessions == 0 {
                self.by_tenant.remove(tenant);
            }
        }
        self.total.sessions -= usage.sessions;
        self.total.partitions -= usage.partitions;
        self.publish();
    }

    fn publish(&self) {
        metrics::FETCH_SESSIONS.set(self.total.sessions as i64);
        metrics::FETCH_SESSION_PARTITIONS.set(self.total.partitions as i64);
    }

    fn touch(&mut self, id: i32, now: Instant) {
        if let Some(entry) = self.entries.get_mut(&id) {
            self.last_used.remove(&(entry.last_used, id));
            entry.last_used = now.max(entry.last_used);
            self.last_used.insert((entry.last_used, id));
        }
    }

    /// Records a session's new size; false if it is empty or passes a bound.
    fn resize(&mut self, bounds: &FetchSessionBounds, id: i32, size: usize) -> bool {
        let Some(entry) = self.entries.get_mut(&id) else { return false };
        let (was, tenant) = (entry.partitions, entry.session.tenant.clone());
        let grows = size.saturating_sub(was);
        let tenant_used = self.by_tenant.get(&tenant).map_or(0, |u| u.partitions);
        let fits = size > 0
            && size <= bounds.session_partitions
            && self.total.partitions + grows <= bounds.partitions
            && (tenant.is_none() || tenant_used + grows <= bounds.tenant_partitions);
        if fits {
            entry.partitions = size;
            self.subtract(&tenant, Usage { sessions: 0, partitions: was });
            self.add(&tenant, Usage { sessions: 0, partitions: size });
        }
        fits
    }

    fn evict(&mut self, id: i32, why: Eviction) {
        metrics::FETCH_SESSIONS_EVICTED.with_label_values(&[why.label()]).inc();
        self.remove(id);
    }

    fn remove(&mut self, id: i32) {
        let Some(entry) = self.entries.remove(&id) else { return };
        entry.session.lock().closed = true;
        self.last_used.remove(&(entry.last_used, id));
        if let Some(ids) = self.by_connection.get_mut(&entry.session.connection) {
            ids.retain(|&other| other != id);
            if ids.is_empty() {
                self.by_connection.remove(&entry.session.connection);
            }
        }
        self.subtract(&entry.session.tenant, Usage { sessions: 1, partitions: entry.partitions });
    }
}

#[cfg(test)]
mod tests;
