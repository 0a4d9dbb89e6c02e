//! Limits the metadata state machine enforces on every command, each with its reason.

/// Kafka's own limit on topic name length (file-name bound in Kafka; kept for compatibility).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// Partitions per topic. Bounds one CreateTopics/CreatePartitions command's effect on memory.
pub const TOPIC_PARTITION_COUNT_MAX: i32 = 10_000;
/// Topics per cluster, so a client looping on auto-create cannot exhaust metadata memory.
pub const TOPIC_COUNT_MAX: usize = 100_000;
/// Configs per topic; Kafka has about 40 topic configs.
pub const TOPIC_CONFIG_COUNT_MAX: usize = 256;
/// Bytes of one config value.
pub const CONFIG_VALUE_BYTES_MAX: usize = 16 * 1024;
/// Chunks in one segment commit: one per partition in the flush.
pub const COMMIT_CHUNK_COUNT_MAX: usize = 100_000;
/// Batches summarized per chunk in a commit.
pub const CHUNK_BATCH_COUNT_MAX: usize = 1_000_000;
/// Segment commits whose answers are remembered by key so a retried commit is answered, not
/// applied, again. Retries come within seconds; at a few hundred flushes per second this covers
/// several minutes. (From format 12 an agent's key outlives its answer until its deadline.)
pub const RECENT_COMMITS_MAX: usize = 65_536;
/// Chunks whose answers are kept at most (format 15; 8 bytes each, so about 8 MiB in every
/// node and agent mirror), the oldest answers dropped first. An agent retries a commit whose
/// answer it lost (a leader change, a timeout) within seconds; this keeps some 100 s of answers
/// at 2,000 partitions and 80 flushes a second. A retry later than that finds its key held and
/// is refused, retriably: the producer's retry is then answered by its idempotence sequence.
pub const RECENT_COMMIT_CHUNKS_MAX: usize = 1 << 20;
/// How long after its object key was drawn (the time in its UUIDv7) a segment commit may still
/// apply, judged on the leader's clock as the state knows it (`State::leader_time_floor_ms`,
/// under a minute behind), from format 12. A copy held longer (by a paused node, a retransmit
/// queue) is refused: its key may have been forgotten and its object collected. Agents give up
/// on a flush after half the orphan grace (300 s by default) and a minute before this at the
/// latest; a commit this admits lands within about seven minutes of its key being drawn, before
/// the default orphan grace (600 s) lets garbage collection take its object for an orphan.
pub const SEGMENT_COMMIT_WINDOW_MS: i64 = 6 * 60 * 1000;
/// Segment commit keys the state holds at most (format 12): each until its deadline has passed
/// (about seven minutes, the window and a minute), so that none is applied twice. That is some
/// 1,200 flushes a second, and up to about 100 MB in every node and agent mirror; beyond it
/// commits are refused (retriably) rather than a key forgotten early.
pub const RECENT_COMMIT_KEYS_MAX: usize = 524_288;
const _: () = assert!(RECENT_COMMITS_MAX < RECENT_COMMIT_KEYS_MAX);
/// Highest log end offset a partition may reach; commits past it are refused rather than
/// overflow (at a million records a second this lasts over a hundred thousand years).
pub const PARTITION_OFFSET_MAX: i64 = i64::MAX / 2;
/// Segment commits grouped into one Raft entry at most.
pub const COMMIT_GROUP_MAX: usize = 1024;
/// Agents the cluster tracks.
pub const AGENT_COUNT_MAX: usize = 10_000;
/// An agent silent this long is forgotten (it is no longer listed as live long before that).
pub const AGENT_FORGET_MS: i64 = 60 * 60 * 1000;
/// Longest agent group name (format 9).
pub const AGENT_GROUP_BYTES_MAX: usize = 64;

/// An agent group name: empty (the default group) or up to [`AGENT_GROUP_BYTES_MAX`] bytes of
/// letters, digits, `.`, `_` and `-`.
pub fn valid_agent_group(name: &str) -> bool {
    name.len() <= AGENT_GROUP_BYTES_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}
/// Bytes of an agent's peer address (`HOST:PORT`).
pub const PEER_ADDR_BYTES_MAX: usize = 255;

/// An agent's peer address: `HOST:PORT` (an IPv6 host in brackets), a port other than 0, no
/// spaces, at most [`PEER_ADDR_BYTES_MAX`] bytes.
pub fn valid_peer_addr(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else { return false };
    addr.len() <= PEER_ADDR_BYTES_MAX
        && !host.is_empty()
        && !addr.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        && port.parse::<u16>().is_ok_and(|p| p != 0)
}
/// Consumer groups per cluster (each also bounded by its offsets: one per partition at most).
pub const GROUP_COUNT_MAX: usize = 100_000;
/// Bytes of a group id.
pub const GROUP_ID_BYTES_MAX: usize = 1024;
/// Members of one group (Kafka's `group.max.size` is unbounded by default).
pub const GROUP_MEMBERS_MAX: usize = 10_000;
/// Protocols one member may offer in JoinGroup (consumers offer one per assignor).
pub const GROUP_PROTOCOLS_MAX: usize = 64;
/// Bytes of a protocol name, client id, client host or group instance id in a group.
pub const GROUP_NAME_BYTES_MAX: usize = 1024;
/// Bytes of one member's ids, subscription and assignment together.
pub const GROUP_MEMBER_BYTES_MAX: usize = 1024 * 1024;
/// Idempotent and transactional producers tracked at once (each costs its sequences per
/// partition written); ids idle past `producer.id.expiration.ms` are forgotten.
pub const PRODUCER_COUNT_MAX: usize = 1_000_000;
/// Chunks remembered per producer and partition for duplicate detection: Kafka's 5 in-flight
/// requests per connection (`max.in.flight.requests.per.connection` with idempotence).
pub const PRODUCER_SEQUENCES_KEPT: usize = 5;
/// Transactional ids per cluster.
pub const TRANSACTION_COUNT_MAX: usize = 100_000;
/// Bytes of a transactional id.
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 1024;
/// Partitions one transaction may write.
pub const TRANSACTION_PARTITIONS_MAX: usize = 10_000;
/// Groups one transaction may commit offsets for.
pub const TRANSACTION_GROUPS_MAX: usize = 100;
/// Index entries one compaction may merge.
pub const COMPACTION_RUN_ENTRIES_MAX: usize = 10_000;
/// Partitions' runs one compacted object may hold (`Command::CompactRuns`).
pub const COMPACTED_OBJECT_RUNS_MAX: usize = 10_000;
/// Index entries one `Command::CompactRuns` may replace in all: the work of one apply, which
/// holds the state's lock.
pub const COMPACTED_OBJECT_ENTRIES_MAX: usize = 1_000_000;
/// Index entries one key compaction may replace, and may produce.
pub const CLEANED_RANGE_ENTRIES_MAX: usize = 10_000;
/// Largest encoded command the journal accepts; a larger one is a bug or an attack.
pub const COMMAND_BYTES_MAX: usize = 64 * 1024 * 1024;

const _: () = assert!(TOPIC_PARTITION_COUNT_MAX > 0);
/// Longest storage-job lease an agent may take: a dead holder's jobs resume within this.
pub const JOB_LEASE_MS_MAX: i64 = 600_000;
/// Longest HTTP `Idempotency-Key`, in bytes.
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 255;
/// Tenants one cluster holds.
pub const TENANT_COUNT_MAX: usize = 10_000;
/// SASL users across all tenants.
pub const USER_COUNT_MAX: usize = 100_000;
/// HTTP API keys across all tenants.
pub const API_KEY_COUNT_MAX: usize = 100_000;
/// Longest tenant name, user name or API key id, in bytes.
pub const CREDENTIAL_NAME_BYTES_MAX: usize = 255;
/// SCRAM iteration counts accepted: Kafka's bounds (4096 is its minimum, as RFC 7677 advises).
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;
pub const SCRAM_ITERATIONS_MAX: u32 = 16_384;
/// CORS origins one tenant may list, and the longest origin.
pub const TENANT_CORS_ORIGINS_MAX: usize = 32;
pub const ORIGIN_BYTES_MAX: usize = 255;
/// ACL bindings across all tenants: each is checked on every request that names its resource.
pub const ACL_COUNT_MAX: usize = 100_000;
/// Bindings one CreateAcls or DeleteAcls command carries.
pub const ACL_COMMAND_ITEMS_MAX: usize = 1_000;
/// Longest ACL resource name (a group or transactional id may be long), principal and host.
pub const ACL_RESOURCE_NAME_BYTES_MAX: usize = 1024;
pub const ACL_PRINCIPAL_BYTES_MAX: usize = 512;
pub const ACL_HOST_BYTES_MAX: usize = 255;
/// Bytes of one schema's text (Confluent's registry refuses larger with 42209): a schema is
/// held in every agent's mirror.
pub const SCHEMA_TEXT_BYTES_MAX: usize = 1024 * 1024;
/// References one schema may name (each is resolved and parsed along with it).
pub const SCHEMA_REFERENCES_MAX: usize = 256;
/// Bytes of a registry subject name or a reference name.
pub const SUBJECT_NAME_BYTES_MAX: usize = 1024;
/// Versions one subject keeps, soft-deleted ones included: transitive compatibility checks
/// parse them all.
pub const SUBJECT_VERSIONS_MAX: usize = 1_000;
/// Subjects and schemas across all registries, and their schema bytes together.
pub const REGISTRY_SUBJECT_COUNT_MAX: usize = 100_000;
pub const REGISTRY_SCHEMA_COUNT_MAX: usize = 100_000;
pub const REGISTRY_BYTES_MAX: u64 = 256 * 1024 * 1024;
/// Bytes of a table's metadata location (an absolute URI under the bucket's `tables/` prefix).
pub const TABLE_LOCATION_BYTES_MAX: usize = 1024;
/// Retired generations one table topic keeps listing.
pub const TABLE_GENERATIONS_MAX: usize = 16;
/// Entries (minute × tenant) in one agent usage report.
pub const USAGE_REPORT_ENTRIES_MAX: usize = 10_000;
/// Bytes of a usage reporter id (agents draw a UUID).
pub const USAGE_REPORTER_ID_BYTES_MAX: usize = 64;
/// Bytes of a tenant name in a usage report (tenant names are shorter).
pub const USAGE_TENANT_BYTES_MAX: usize = 255;
/// Minutes a usage close fills with storage samples after a pause of the leader (a day): a
/// longer gap is not sampled.
pub const USAGE_CLOSE_BACKFILL_MINUTES: i64 = 24 * 60;
/// Exported usage minutes stay in the state this long (served by the usage API from memory);
/// unexported ones up to seven times longer. Every tenant with topics has a row a minute (its
/// storage sample), and every node and agent mirror holds them: six hours of 1,000 tenants is
/// about 400,000 rows. Older usage is read from the hourly files.
pub const USAGE_MINUTES_KEPT_MS: i64 = 6 * 60 * 60 * 1000;
/// A usage reporter silent this long is forgotten (its journal is long gone).
pub const USAGE_REPORTER_FORGET_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Tenants with their own series in per-tenant metrics a metadata node exports (those nearest
/// their storage quotas), so a cluster of many tenants keeps a bounded scrape.
pub const TENANT_SERIES_MAX: usize = 100;

/// Links a cluster holds (format 11).
pub const LINK_COUNT_MAX: usize = 100;
/// A link's name.
pub const LINK_NAME_BYTES_MAX: usize = 128;
/// A link's bootstrap servers and each of its patterns.
pub const LINK_FIELD_BYTES_MAX: usize = 4096;
/// A link's CA bundle.
pub const LINK_CA_BYTES_MAX: usize = 64 * 1024;
/// The error a link's job reports.
pub const LINK_ERROR_BYTES_MAX: usize = 1024;
/// Transaction events of one mirrored chunk.
pub const LINK_TXN_EVENTS_MAX: usize = 100_000;
