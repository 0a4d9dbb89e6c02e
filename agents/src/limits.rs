//! Limits of the agent, each with the reason for its value.

use std::time::Duration;

/// Largest request frame read off a socket (Kafka's `socket.request.max.bytes` default); a
/// larger length prefix closes the connection.
pub const FRAME_BYTES_MAX: usize = 100 * 1024 * 1024;
/// Upper bound for any topic's `max.message.bytes`: one batch must fit a frame with room for
/// the request around it.
pub const BATCH_BYTES_MAX: usize = 64 * 1024 * 1024;
const _: () = assert!(BATCH_BYTES_MAX < FRAME_BYTES_MAX);

/// Requests one connection may have in flight (read but not yet answered); past this the agent
/// stops reading. A produce waits for a flush (up to `--flush-interval-ms`, 250 ms on S3), and
/// librdkafka pipelines without limit (`max.in.flight` 1000000), sending a request per
/// partition batch as `linger.ms` expires: at 64, one connection topped out at 256 requests a
/// second on S3 timing (BENCHMARKS.md, loadtest); at 1,024, a producer of 2,000 partitions
/// (about a request per record) at about 8,000 requests a second under the `s3-standard`
/// profile, its p99 3.5 s against 286 ms at 8,192 (issue 53). Each costs about a KiB of
/// bookkeeping here (8 MiB at most per connection); the batches of waiting produce requests are
/// held in the flush buffer, bounded by `--buffer-bytes`. A tenant over its quota gets no more
/// for it: its connection is not read while a hold lasts (`connection.rs`).
pub const CONNECTION_REQUESTS_IN_FLIGHT_MAX: usize = 8192;
/// Bytes one connection's read and unanswered requests may hold: each request's frame and, for
/// a Fetch, the answer it may grow to (its `max_bytes`, at most [`FETCH_RESPONSE_BYTES_MAX`]).
/// Past it the connection is not read until answers are written, so a client that pipelines
/// large fetches and reads no answers holds at most this much (before it, 8,192 fetches of
/// 55 MiB each could wait unwritten: issue 53). A request is always read when nothing else
/// is in flight, so one of any allowed size proceeds. Real clients keep one fetch in flight per
/// connection (50 MiB by default in Java and librdkafka); producers a few MiB.
pub const CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX: u64 = 128 * 1024 * 1024;

/// How long a sequence hold (`produce::holds`) lasts after the last failure of its chunk. A
/// producer still retrying the chunk renews it; one that gave the chunk up bumps its epoch,
/// which lifts it. Past Kafka clients' default delivery timeouts (Java's 120 s, librdkafka's
/// 300 s) a hold can only be stale: its producer went away.
pub const SEQUENCE_HOLD_DURATION: Duration = Duration::from_secs(300);
/// Sequence holds one agent keeps (about 64 bytes each). A hold is set only for a failed chunk
/// of a producer with no sequences yet on the partition, so this many takes a store outage
/// under a crowd of new producers; past it the oldest hold is dropped (and logged), leaving its
/// producer partition with Kafka's unguarded rule for a first sequence.
pub const SEQUENCE_HOLD_COUNT_MAX: usize = 100_000;

/// Lines one rate-limited log call site (`log_limited!`) writes at once. A client that can make
/// a line per connection or request could otherwise write as many as it opens: a 15-second
/// HTTP/2 rapid-reset flood wrote 48,000 (issue 52). Twenty keeps every line of an ordinary
/// incident.
pub const LOG_LINES_BURST: u32 = 20;
/// How often a rate-limited call site earns one more line, up to [`LOG_LINES_BURST`]: a flood
/// writes one line a second per call site, each counting what it stood for.
pub const LOG_LINE_INTERVAL: Duration = Duration::from_secs(1);

/// Longest long-poll a Fetch may ask for; longer `max_wait_ms` values are clamped.
pub const FETCH_WAIT_MAX: Duration = Duration::from_secs(60);
/// Largest Fetch response body, whatever `max_bytes` asks for (Kafka's `fetch.max.bytes`).
pub const FETCH_RESPONSE_BYTES_MAX: usize = 55 * 1024 * 1024;
/// Index entries one partition read may walk before answering with what it has.
pub const FETCH_PARTITION_ENTRIES_MAX: usize = 1024;
/// Chunks of one partition read whose blocks are loaded ahead, at once: the GETs one Fetch
/// starts together.
pub const FETCH_PREFETCH_CHUNKS_MAX: usize = 16;
/// Times one partition read moves past index entries that held nothing at or after the fetch
/// offset (stretches key compaction emptied) before answering empty.
pub const FETCH_EMPTY_ROUNDS_MAX: usize = 16;

/// Partitions in one request (Produce, Fetch, ListOffsets, ...), across topics.
pub const REQUEST_PARTITION_COUNT_MAX: usize = 100_000;
/// Topics one CreateTopics request may create.
pub const CREATE_TOPICS_COUNT_MAX: usize = 10_000;

/// Records one batch may claim. Batches are not decompressed, so a compressed batch's count is
/// taken on trust up to this bound; it caps how many offsets one batch can consume and what a
/// timestamp lookup that decodes the batch may allocate.
pub const BATCH_RECORD_COUNT_MAX: i32 = 1_000_000;
/// Smallest encoding of one record in an uncompressed batch: seven one-byte varints (length,
/// attributes, timestamp delta, offset delta, key length, value length, header count).
pub const RECORD_BYTES_MIN: usize = 7;
/// Bytes one batch may decompress to when its records must be read (key checks on compacted
/// topics, key compaction): a small compressed batch can expand without bound otherwise.
pub const BATCH_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Largest chunk key compaction writes: a fetch reads whole chunks, so this bounds what one
/// partition read pulls in.
pub const CLEANED_CHUNK_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Memory key compaction's latest-offset map may use (key bytes plus about 48 bytes of map
/// overhead per key); a partition with more keys is compacted a part per pass.
pub const CLEANER_KEY_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Stored bytes one key compaction pass covers: its new object is built in memory.
pub const CLEANER_RANGE_BYTES_MAX: u64 = 512 * 1024 * 1024;
/// Bytes of small chunks a compaction reads before it writes any: chunks are read in the order
/// they lie in their objects, so each object shared by the batch's runs is read once, not once per
/// partition (at 10,000 partitions every flush object holds a chunk of each).
pub const COMPACTION_BATCH_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Consumer group lag series exported per scrape (group × partition); past it the rest are
/// left out so a cluster with very many groups cannot blow up a scrape.
pub const GROUP_LAG_SERIES_MAX: usize = 100_000;
/// Topics with their own `floe_broker_topic_*` series in one agent; the rest are summed as
/// `_other`.
pub const TOPIC_SERIES_MAX: usize = 1_000;
/// Tenants with their own `floe_connections` series per listener; the rest are summed as
/// `_other`, so a cluster of many tenants keeps a bounded scrape.
pub const CONNECTION_TENANT_SERIES_MAX: usize = 50;
/// How long the storage-job lease an agent takes lasts; renewed every job round (each 30 s or
/// 60 s by default), so a dead runner's jobs move to another agent within about this long.
pub const JOB_LEASE: Duration = Duration::from_secs(90);
/// Objects garbage collection deletes per round (each is one DELETE request).
pub const GC_DELETES_PER_ROUND_MAX: usize = 10_000;
/// Objects one orphan search lists (oldest first on S3), bounding its memory.
pub const GC_LISTED_OBJECTS_MAX: usize = 1_000_000;
/// Entries one ListTransactions or DescribeProducers partition answer lists; the response
/// must stay far below the frame limit even with 100k transactional ids.
pub const ADMIN_LIST_MAX: usize = 10_000;
/// Record bytes one table commit reads at most; a table further behind is due again at once.
pub const TABLE_COMMIT_READ_BYTES_MAX: usize = 512 * 1024 * 1024;
/// Bytes one partition read of the table job asks for.
pub const TABLE_READ_BYTES: usize = 8 * 1024 * 1024;
/// Rows collected into one Arrow batch before it is closed (a file holds several).
pub const TABLE_BATCH_ROWS: usize = 65_536;
/// Table topics `floe_table_lag_*` reports at most (one series each).
pub const TABLE_LAG_SERIES_MAX: usize = 10_000;
/// Mirror partitions `floe_link_lag_records` reports at most (one series each).
pub const LINK_LAG_SERIES_MAX: usize = 10_000;
/// Manifests a table lists before a commit merges them into one per partition spec (each
/// commit adds one).
pub const TABLE_MANIFESTS_MAX: usize = 16;
/// Live keys of an upsert table the job indexes (about 100 bytes each plus the key): past it
/// the table's commits fail and its lag grows, rather than the job's memory.
pub const TABLE_UPSERT_KEYS_MAX: usize = 20_000_000;
/// Snapshots a table's metadata keeps at most (older ones expire sooner with `retention.ms`);
/// each costs about 400 bytes of metadata JSON.
pub const TABLE_SNAPSHOTS_MAX: usize = 500;
