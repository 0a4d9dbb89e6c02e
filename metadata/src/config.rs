//! The catalog of Kafka topic, broker and group configs: every standard name, its type, the
//! default Kafka reports for it, and whether it means anything in Floe.
//!
//! Floe accepts, type-checks, stores and reports every config a Kafka tool may send, including
//! the many that only describe Kafka's local log files or replication (`segment.bytes`,
//! `min.insync.replicas`). Those are marked [`Applicability::NotApplicable`] with the reason, so
//! DescribeConfigs can say why a value changes nothing. Both tables are sorted by name, which the
//! compiler checks, so lookups are binary searches. This module only validates and normalizes
//! values; storing them is the state machine's job.

use std::fmt;

use crate::limits::CONFIG_VALUE_BYTES_MAX;

/// Longest excerpt of a rejected name or value copied into a [`ConfigError`], in characters.
const ERROR_EXCERPT_CHARS_MAX: usize = 64;

/// The value type Kafka declares for a config; it decides how a value is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` or `false`, in any letter case.
    Boolean,
    /// Free text.
    String,
    /// A signed 32-bit integer.
    Int,
    /// A signed 16-bit integer.
    Short,
    /// A signed 64-bit integer.
    Long,
    /// A finite 64-bit floating-point number.
    Double,
    /// Comma-separated items.
    List,
    /// A Java class name; Floe stores it but loads nothing.
    Class,
    /// A secret; never echoed back in errors and reported as sensitive.
    Password,
}

/// Whether Floe acts on a config's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applicability {
    /// Floe honours the value (or will, when the feature it governs lands).
    Applied,
    /// Floe stores and reports the value but nothing reads it; the text says why.
    NotApplicable(&'static str),
}

/// One Kafka config: its name, type, default, and what Floe does with it.
///
/// Instances live only in [`TOPIC_CONFIGS`], [`BROKER_CONFIGS`] and [`GROUP_CONFIGS`]; `sensitive` is true exactly
/// for [`ConfigType::Password`], and the private validator always fits `config_type` (both are
/// checked at compile time).
#[derive(Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// Default as Kafka reports it in DescribeConfigs (None = null default).
    pub default: Option<&'static str>,
    pub applicability: Applicability,
    /// True for [`ConfigType::Password`] configs, whose values are never reported.
    pub sensitive: bool,
    /// True for broker configs that cannot be changed dynamically; always false for topics.
    pub read_only: bool,
    /// One line saying what the config controls.
    pub doc: &'static str,
    /// For topic configs: the broker config that supplies the cluster-wide default (e.g.
    /// "log.retention.ms" for "retention.ms"), used as the DEFAULT_CONFIG synonym. Where Kafka
    /// has fallbacks in other units (`log.retention.hours`), this names the preferred one, whose
    /// own default may be null; the topic's `default` is then the effective value.
    pub broker_synonym: Option<&'static str>,
    /// For group configs: the broker configs holding the lowest and highest value a group may
    /// set (`group.share.min.record.lock.duration.ms` and `...max...`).
    pub min_bound: Option<&'static str>,
    pub max_bound: Option<&'static str>,
    validator: Validator,
}

/// Value checks beyond the type, mirroring the ones Kafka applies.
#[derive(Debug, Clone, Copy)]
enum Validator {
    /// Any value of the right type.
    Any,
    /// Integer types: at least this value.
    AtLeast(i64),
    /// Integer types: within this inclusive range.
    Between(i64, i64),
    /// Int: -1 (the codec default) or a gzip level from 1 to 9.
    GzipLevel,
    /// Double: within this inclusive range.
    DoubleBetween(f64, f64),
    /// String: exactly one of these, letter case included.
    OneOf(&'static [&'static str]),
    /// List: distinct items from this set; `empty_ok` allows an empty list.
    ListOf { allowed: &'static [&'static str], empty_ok: bool },
    /// List: empty, `*`, or `partition:broker` pairs.
    ThrottledReplicas,
    /// String: how a table topic partitions its table (`none`, `hour`, `day`, or `hour:FIELD`
    /// and `day:FIELD` for a timestamp field of the value).
    TablePartitionBy,
    /// String: where a share group starts (`earliest`, `latest` or `by_duration:` an ISO-8601
    /// duration).
    ShareOffsetReset,
}

/// A config name or value that Floe refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No config of that name exists for the resource.
    UnknownName { name: String },
    /// The value does not parse as the config's type or breaks its range or choice rules.
    /// `value` is an excerpt, hidden for sensitive configs.
    InvalidValue { name: String, value: String, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug formatting escapes newlines and quotes, so the message stays on one line.
        match self {
            ConfigError::UnknownName { name } => write!(f, "unknown config {name:?}"),
            ConfigError::InvalidValue { name, value, reason } => {
                write!(f, "invalid value {value:?} for config {name:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigDef {
    /// Type- and range-check a value; returns the normalized value to store (trimmed; booleans lowercased; lists with whitespace around commas removed).
    ///
    /// Integers are also written in canonical form (`+007` becomes `7`).
    pub fn validate(&self, value: &str) -> Result<String, ConfigError> {
        self.normalize(value).map_err(|reason| ConfigError::InvalidValue {
            name: self.name.to_owned(),
            value: if self.sensitive { "[hidden]".to_owned() } else { excerpt(value) },
            reason,
        })
    }

    fn normalize(&self, value: &str) -> Result<String, String> {
        if value.len() > CONFIG_VALUE_BYTES_MAX {
            return Err(format!("longer than {CONFIG_VALUE_BYTES_MAX} bytes"));
        }
        let value = value.trim();
        match self.config_type {
            ConfigType::Boolean => normalize_boolean(value),
            ConfigType::Short => {
                normalize_integer(value, i16::MIN.into(), i16::MAX.into(), "a 16-bit integer", self.validator)
            }
            ConfigType::Int => {
                normalize_integer(value, i32::MIN.into(), i32::MAX.into(), "a 32-bit integer", self.validator)
            }
            ConfigType::Long => normalize_integer(value, i64::MIN, i64::MAX, "a 64-bit integer", self.validator),
            ConfigType::Double => normalize_double(value, self.validator),
            ConfigType::List => normalize_list(value, self.validator),
            ConfigType::String | ConfigType::Class | ConfigType::Password => normalize_text(value, self.validator),
        }
    }
}

/// Looks up a topic config by its exact name.
pub fn topic_config(name: &str) -> Option<&'static ConfigDef> {
    lookup(TOPIC_CONFIGS, name)
}

/// Looks up a broker config by its exact name.
pub fn broker_config(name: &str) -> Option<&'static ConfigDef> {
    lookup(BROKER_CONFIGS, name)
}

/// Broker configs format 8 made dynamic (a group config's bounds), and values it added.
const DYNAMIC_SINCE_FORMAT_8: &[&str] = &[
    "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.session.timeout.ms",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms",
    "group.share.max.heartbeat.interval.ms",
    "group.share.max.record.lock.duration.ms",
    "group.share.max.session.timeout.ms",
    "group.share.min.heartbeat.interval.ms",
    "group.share.min.record.lock.duration.ms",
    "group.share.min.session.timeout.ms",
];

/// Whether a broker config value is one only format 8 accepts, so a cluster applies it only
/// once every metadata node runs format 8.
pub fn needs_format_8(name: &str, value: &str) -> bool {
    DYNAMIC_SINCE_FORMAT_8.contains(&name)
        || (name == "floe.share.auto.offset.reset" && !matches!(value, "earliest" | "latest"))
}

/// Looks up a group config by its exact name.
pub fn group_config(name: &str) -> Option<&'static ConfigDef> {
    lookup(GROUP_CONFIGS, name)
}

/// Validates a topic config value; see [`ConfigDef::validate`].
pub fn validate_topic_config(name: &str, value: &str) -> Result<String, ConfigError> {
    topic_config(name).ok_or_else(|| unknown(name))?.validate(value)
}

/// Validates a broker config value; see [`ConfigDef::validate`].
pub fn validate_broker_config(name: &str, value: &str) -> Result<String, ConfigError> {
    broker_config(name).ok_or_else(|| unknown(name))?.validate(value)
}

/// Validates a group config value; see [`ConfigDef::validate`]. Its bounds, broker configs,
/// are the caller's to check ([`ConfigDef::min_bound`], [`ConfigDef::max_bound`]).
pub fn validate_group_config(name: &str, value: &str) -> Result<String, ConfigError> {
    group_config(name).ok_or_else(|| unknown(name))?.validate(value)
}

fn lookup(table: &'static [ConfigDef], name: &str) -> Option<&'static ConfigDef> {
    let index = table.binary_search_by(|def| def.name.cmp(name)).ok()?;
    table.get(index)
}

fn unknown(name: &str) -> ConfigError {
    ConfigError::UnknownName { name: excerpt(name) }
}

/// The first characters of untrusted text, so an error never carries a whole oversized value.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(ERROR_EXCERPT_CHARS_MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

fn normalize_boolean(value: &str) -> Result<String, String> {
    if value.eq_ignore_ascii_case("true") {
        Ok("true".to_owned())
    } else if value.eq_ignore_ascii_case("false") {
        Ok("false".to_owned())
    } else {
        Err("expected true or false".to_owned())
    }
}

fn normalize_integer(value: &str, min: i64, max: i64, kind: &str, validator: Validator) -> Result<String, String> {
    let number = value
        .parse::<i64>()
        .ok()
        .filter(|number| (min..=max).contains(number))
        .ok_or_else(|| format!("expected {kind}"))?;
    match validator {
        Validator::Any => {}
        Validator::AtLeast(low) if number < low => return Err(format!("must be at least {low}")),
        Validator::Between(low, high) if !(low..=high).contains(&number) => {
            return Err(format!("must be between {low} and {high}"));
        }
        Validator::GzipLevel if number != -1 && !(1..=9).contains(&number) => {
            return Err("must be -1 or between 1 and 9".to_owned());
        }
        Validator::AtLeast(_) | Validator::Between(..) | Validator::GzipLevel => {}
        Validator::DoubleBetween(..)
        | Validator::OneOf(_)
        | Validator::ListOf { .. }
        | Validator::ThrottledReplicas
        | Validator::TablePartitionBy
        | Validator::ShareOffsetReset => {
            unreachable!("validator_fits_type is checked at compile time")
        }
    }
    Ok(number.to_string())
}

fn normalize_double(value: &str, validator: Validator) -> Result<String, String> {
    let number = value
        .parse::<f64>()
        .ok()
        .filter(|number| number.is_finite())
        .ok_or_else(|| "expected a finite number".to_owned())?;
    match validator {
        Validator::Any => {}
        Validator::DoubleBetween(low, high) if !(low..=high).contains(&number) => {
            return Err(format!("must be between {low} and {high}"));
        }
        Validator::DoubleBetween(..) => {}
        Validator::AtLeast(_)
        | Validator::Between(..)
        | Validator::GzipLevel
        | Validator::OneOf(_)
        | Validator::ListOf { .. }
        | Validator::ThrottledReplicas
        | Validator::TablePartitionBy
        | Validator::ShareOffsetReset => unreachable!("validator_fits_type is checked at compile time"),
    }
    // Kept as written: reformatting would turn 1.7976931348623157E308 into 309 digits.
    Ok(value.to_owned())
}

fn normalize_text(value: &str, validator: Validator) -> Result<String, String> {
    match validator {
        Validator::Any => {}
        Validator::OneOf(allowed) if !allowed.contains(&value) => {
            return Err(format!("expected one of: {}", allowed.join(", ")));
        }
        Validator::OneOf(_) => {}
        Validator::TablePartitionBy => {
            if table_partition_by(value).is_none() {
                return Err("expected none, hour, day, hour:FIELD or day:FIELD".to_owned());
            }
        }
        Validator::ShareOffsetReset => {
            if share_offset_reset(value).is_none() {
                return Err("expected earliest, latest or by_duration:PnDTnHnMn.nS".to_owned());
            }
        }
        Validator::AtLeast(_)
        | Validator::Between(..)
        | Validator::GzipLevel
        | Validator::DoubleBetween(..)
        | Validator::ListOf { .. }
        | Validator::ThrottledReplicas => unreachable!("validator_fits_type is checked at compile time"),
    }
    Ok(value.to_owned())
}

fn normalize_list(value: &str, validator: Validator) -> Result<String, String> {
    // Kafka reads an empty (or all-blank) value as the empty list.
    let items: Vec<&str> = if value.is_empty() { Vec::new() } else { value.split(',').map(str::trim).collect() };
    if items.iter().any(|item| item.is_empty()) {
        return Err("list has an empty item".to_owned());
    }
    match validator {
        Validator::Any => {}
        Validator::ListOf { allowed, empty_ok } => {
            if items.is_empty() && !empty_ok {
                return Err(format!("expected at least one of: {}", allowed.join(", ")));
            }
            for (position, item) in items.iter().enumerate() {
                if !allowed.contains(item) {
                    return Err(format!("item {item:?} is not one of: {}", allowed.join(", ")));
                }
                if items[..position].contains(item) {
                    return Err(format!("item {item:?} is listed twice"));
                }
            }
        }
        Validator::ThrottledReplicas => {
            if items != ["*"] && !items.iter().all(|item| is_replica_pair(item)) {
                return Err("expected * or a list of partition:broker pairs".to_owned());
            }
        }
        Validator::AtLeast(_)
        | Validator::Between(..)
        | Validator::GzipLevel
        | Validator::DoubleBetween(..)
        | Validator::OneOf(_)
        | Validator::TablePartitionBy
        | Validator::ShareOffsetReset => unreachable!("validator_fits_type is checked at compile time"),
    }
    Ok(items.join(","))
}

/// How a table topic's table is partitioned (`floe.table.partition.by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TablePartitionBy<'a> {
    None,
    /// Hours since the epoch of the record timestamp, or of this value field.
    Hour(Option<&'a str>),
    /// Days since the epoch of the record timestamp, or of this value field.
    Day(Option<&'a str>),
}

/// Longest field name `floe.table.partition.by` may name.
const TABLE_PARTITION_FIELD_BYTES_MAX: usize = 255;

/// Parses a `floe.table.partition.by` value.
pub fn table_partition_by(value: &str) -> Option<TablePartitionBy<'_>> {
    let field = |name: &'_ str| -> bool {
        !name.is_empty()
            && name.len() <= TABLE_PARTITION_FIELD_BYTES_MAX
            && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
    };
    match value.split_once(':') {
        None => match value {
            "none" => Some(TablePartitionBy::None),
            "hour" => Some(TablePartitionBy::Hour(None)),
            "day" => Some(TablePartitionBy::Day(None)),
            _ => None,
        },
        Some(("hour", name)) if field(name) => Some(TablePartitionBy::Hour(Some(name))),
        Some(("day", name)) if field(name) => Some(TablePartitionBy::Day(Some(name))),
        Some(_) => None,
    }
}

/// Where a share group starts reading a partition it has not read before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareOffsetReset {
    Earliest,
    Latest,
    /// The first record written at most this many milliseconds ago.
    ByDuration(i64),
}

/// Parses a `share.auto.offset.reset` value: `earliest`, `latest`, or `by_duration:` and an
/// ISO-8601 duration of days, hours, minutes and seconds (`P1DT2H`, `PT30M`, `PT0.5S`), as
/// Java's `Duration.parse` reads them, without a sign.
pub fn share_offset_reset(value: &str) -> Option<ShareOffsetReset> {
    match value {
        "earliest" => Some(ShareOffsetReset::Earliest),
        "latest" => Some(ShareOffsetReset::Latest),
        _ => value.strip_prefix("by_duration:").and_then(iso_duration_ms).map(ShareOffsetReset::ByDuration),
    }
}

/// Milliseconds of a `PnDTnHnMn.nS` duration; `None` unless it names at least one part, each
/// at most once and in that order.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) if !time.is_empty() => (date, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total: i64 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let days: i64 = date.strip_suffix('D').filter(|d| is_digits(d))?.parse().ok()?;
        total = days.checked_mul(86_400_000)?;
        parts += 1;
    }
    if let Some(mut time) = time {
        for (unit, ms) in [('H', 3_600_000_i64), ('M', 60_000)] {
            if let Some((number, after)) = time.split_once(unit)
                && is_digits(number)
            {
                total = total.checked_add(number.parse::<i64>().ok()?.checked_mul(ms)?)?;
                time = after;
                parts += 1;
            }
        }
        if !time.is_empty() {
            let seconds = time.strip_suffix('S')?;
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            if !is_digits(whole) || !(fraction.is_empty() || (is_digits(fraction) && fraction.len() <= 9)) {
                return None;
            }
            let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
            total = total.checked_add(whole.parse::<i64>().ok()?.checked_mul(1_000)?)?.checked_add(millis)?;
            parts += 1;
        }
    }
    (parts > 0).then_some(total)
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `partition:broker`, both decimal digits, as in a throttled-replicas list.
fn is_replica_pair(item: &str) -> bool {
    let all_digits = |text: &str| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    item.split_once(':').is_some_and(|(partition, broker)| all_digits(partition) && all_digits(broker))
}

// Table construction. Rows start from `def` (or `def_null` for a null default) and add rules with
// the builder methods below, all `const` so the tables are plain statics.

const fn def(name: &'static str, config_type: ConfigType, default: &'static str, doc: &'static str) -> ConfigDef {
    def_with(name, config_type, Some(default), doc)
}

const fn def_null(name: &'static str, config_type: ConfigType, doc: &'static str) -> ConfigDef {
    def_with(name, config_type, None, doc)
}

const fn def_with(
    name: &'static str,
    config_type: ConfigType,
    default: Option<&'static str>,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        config_type,
        default,
        applicability: Applicability::Applied,
        sensitive: matches!(config_type, ConfigType::Password),
        read_only: false,
        doc,
        broker_synonym: None,
        min_bound: None,
        max_bound: None,
        validator: Validator::Any,
    }
}

impl ConfigDef {
    const fn at_least(mut self, low: i64) -> Self {
        self.validator = Validator::AtLeast(low);
        self
    }

    const fn between(mut self, low: i64, high: i64) -> Self {
        self.validator = Validator::Between(low, high);
        self
    }

    const fn gzip_level(mut self) -> Self {
        self.validator = Validator::GzipLevel;
        self
    }

    const fn fraction(mut self) -> Self {
        self.validator = Validator::DoubleBetween(0.0, 1.0);
        self
    }

    const fn table_partition_by(mut self) -> Self {
        self.validator = Validator::TablePartitionBy;
        self
    }

    const fn share_offset_reset(mut self) -> Self {
        self.validator = Validator::ShareOffsetReset;
        self
    }

    const fn bounded_by(mut self, min: &'static str, max: &'static str) -> Self {
        self.min_bound = Some(min);
        self.max_bound = Some(max);
        self
    }

    const fn at_most_broker(mut self, max: &'static str) -> Self {
        self.max_bound = Some(max);
        self
    }

    const fn one_of(mut self, allowed: &'static [&'static str]) -> Self {
        self.validator = Validator::OneOf(allowed);
        self
    }

    /// A non-empty list of distinct items from `allowed`.
    const fn list_of(mut self, allowed: &'static [&'static str]) -> Self {
        self.validator = Validator::ListOf { allowed, empty_ok: false };
        self
    }

    /// A possibly empty list of distinct items from `allowed`.
    const fn list_of_or_empty(mut self, allowed: &'static [&'static str]) -> Self {
        self.validator = Validator::ListOf { allowed, empty_ok: true };
        self
    }

    const fn throttled_replicas(mut self) -> Self {
        self.validator = Validator::ThrottledReplicas;
        self
    }

    const fn synonym(mut self, broker_name: &'static str) -> Self {
        self.broker_synonym = Some(broker_name);
        self
    }

    const fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    const fn not_applicable(mut self, reason: &'static str) -> Self {
        self.applicability = Applicability::NotApplicable(reason);
        self
    }
}

// Why a config has no effect. Kafka's "segment" is a per-partition log file; Floe's segment is a
// multi-partition object, so these reasons say "log files" for Kafka's.
const OBJECTS_SHARED: &str = "objects hold many topics' records; the cluster-wide log.segment.delete.delay.ms applies";
const NO_LOG_FILES: &str = "Floe keeps no per-partition log files; records live in multi-partition objects";
const NO_FSYNC: &str = "a write is acknowledged only once it is in object storage and committed, so nothing is flushed";
const NO_REPLICAS: &str = "Floe has no replicas; durability comes from object storage";
const NO_LEADERS: &str = "partitions have no leader; every agent accepts writes for every partition";
const NO_TIERS: &str = "object storage is Floe's only storage tier";
const ONLY_FORMAT_V2: &str = "Floe accepts and serves only record batch format v2, without conversion";
const NO_THREAD_POOLS: &str = "agents run on an async runtime without Kafka's fixed thread pools";
const NO_PLUGINS: &str = "Floe loads no Java plug-in classes";
const NO_INTERNAL_TOPICS: &str = "group offsets and transactions live in the metadata service, not in internal topics";
const NO_KRAFT: &str = "Floe's metadata service replicates with its own Raft group, not KRaft";
const AGENT_FLAGS: &str = "set by the agent's command-line flags, not by broker configs";
const NO_PURGATORY: &str = "agents wake waiting requests on commit events, not by polling a purgatory";
const COMPACTION_JOB: &str = "compaction is a background job scheduled by the metadata service";
const CODEC_DEFAULT_LEVELS: &str = "compaction recompresses with each codec's default level";
const METRICS_ENDPOINT: &str = "Floe exports Prometheus metrics at /metrics";
const NO_DELEGATION_TOKENS: &str = "Floe does not issue delegation tokens";
const LISTEN_BACKLOG_FLAG: &str = "agents take it from --socket-listen-backlog-size (4096 by default)";
const CONNECTION_FLAGS: &str = "agents take connection limits from --max-connections, --max-connections-per-ip and --max-connections-per-ip-overrides";
const ONE_SHARE_ASSIGNOR: &str = "share groups have one assignor, simple";
const SHARE_STATE_IN_METADATA: &str = "share-partition state lives in the metadata service, not in a state topic";
const NO_STREAMS_GROUPS: &str = "Floe does not implement streams groups (KIP-1071) yet";
const NO_CLIENT_TELEMETRY: &str = "Floe does not serve client telemetry (KIP-714) yet";
const NO_BROKER_CONNECTIONS: &str = "agents open no Kafka connections to other brokers or controllers";
const PLAIN_SCRAM_ONLY: &str = "agents offer only SASL PLAIN and SCRAM, not GSSAPI (Kerberos) or OAUTHBEARER";
const NO_JVM: &str = "agents use rustls for TLS, not a JVM's security providers";

/// Kafka's compression codecs for `compression.type`, plus `producer` (keep the client's codec).
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const CLEANUP_POLICIES: &[&str] = &["delete", "compact"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const TOPIC_NAME_STRATEGY: &str = "io.confluent.kafka.serializers.subject.TopicNameStrategy";
const SUBJECT_NAME_STRATEGIES: &[&str] = &[
    TOPIC_NAME_STRATEGY,
    "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
    "TopicNameStrategy",
    "RecordNameStrategy",
    "TopicRecordNameStrategy",
];
const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

use ConfigType as T;

/// Every standard Kafka topic config, sorted by name.
pub static TOPIC_CONFIGS: &[ConfigDef] = &[
    def(
        "cleanup.policy",
        T::List,
        "delete",
        "How old records go: delete removes them by age or size, compact keeps the newest per key.",
    )
    .list_of(CLEANUP_POLICIES)
    .synonym("log.cleanup.policy"),
    def(
        "compression.gzip.level",
        T::Int,
        "-1",
        "Gzip level used when the topic recompresses with gzip; -1 picks the codec default.",
    )
    .gzip_level()
    .synonym("compression.gzip.level")
    .not_applicable(CODEC_DEFAULT_LEVELS),
    def("compression.lz4.level", T::Int, "9", "LZ4 level used when the topic recompresses with lz4.")
        .between(1, 17)
        .synonym("compression.lz4.level")
        .not_applicable(CODEC_DEFAULT_LEVELS),
    def(
        "compression.type",
        T::String,
        "producer",
        "Codec stored batches must use; producer keeps whatever the client sent.",
    )
    .one_of(COMPRESSION_TYPES)
    .synonym("compression.type"),
    def("compression.zstd.level", T::Int, "3", "Zstandard level used when the topic recompresses with zstd.")
        .between(-131_072, 22)
        .synonym("compression.zstd.level")
        .not_applicable(CODEC_DEFAULT_LEVELS),
    def(
        "confluent.key.schema.validation",
        T::Boolean,
        "false",
        "Whether every non-null key must name a schema of the registry registered under the key subject.",
    ),
    def(
        "confluent.key.subject.name.strategy",
        T::String,
        TOPIC_NAME_STRATEGY,
        "How the key subject is named: {topic}-key, the record's full name, or {topic}-{record name}.",
    )
    .one_of(SUBJECT_NAME_STRATEGIES),
    def(
        "confluent.value.schema.validation",
        T::Boolean,
        "false",
        "Whether every non-null value must name a schema of the registry registered under the value subject.",
    ),
    def(
        "confluent.value.subject.name.strategy",
        T::String,
        TOPIC_NAME_STRATEGY,
        "How the value subject is named: {topic}-value, the record's full name, or {topic}-{record name}.",
    )
    .one_of(SUBJECT_NAME_STRATEGIES),
    def(
        "delete.retention.ms",
        T::Long,
        "86400000",
        "How long a tombstone outlives compaction, so consumers still see the delete.",
    )
    .at_least(0)
    .synonym("log.cleaner.delete.retention.ms"),
    def("file.delete.delay.ms", T::Long, "60000", "Kafka's pause before removing a deleted log file from disk.")
        .at_least(0)
        .synonym("log.segment.delete.delay.ms")
        .not_applicable(OBJECTS_SHARED),
    def(
        "floe.schema.validation.mode",
        T::String,
        "id",
        "With schema validation on: id checks the framing and schema id, full also checks each payload against the schema.",
    )
    .one_of(&["id", "full"]),
    def(
        "floe.table.commit.interval.ms",
        T::Long,
        "60000",
        "How often a table topic's new records are committed to its Iceberg table: the table's freshness.",
    )
    .between(100, 86_400_000),
    def(
        "floe.table.enable",
        T::Boolean,
        "false",
        "Whether the topic's records also land in an Iceberg table of Parquet files under the bucket's tables/ prefix.",
    ),
    def(
        "floe.table.partition.by",
        T::String,
        "none",
        "How a table topic's table is partitioned: none, hour or day of the record timestamp, or hour:FIELD or day:FIELD of a value field.",
    )
    .table_partition_by(),
    def(
        "floe.table.schema.incompatible",
        T::String,
        "refuse",
        "What a schema version the table cannot evolve to does: refused at registration (records already written with one go to the dead-letter table).",
    )
    .one_of(&["refuse"]),
    def(
        "floe.table.target.file.bytes",
        T::Long,
        "134217728",
        "Size at which a table topic's Parquet data file is closed and the next one started.",
    )
    .between(1_048_576, 536_870_912),
    def(
        "flush.messages",
        T::Long,
        "9223372036854775807",
        "Kafka's count of appended records that forces an fsync of the partition log.",
    )
    .at_least(1)
    .synonym("log.flush.interval.messages")
    .not_applicable(NO_FSYNC),
    def(
        "flush.ms",
        T::Long,
        "9223372036854775807",
        "Kafka's age of unflushed records that forces an fsync of the partition log.",
    )
    .at_least(0)
    .synonym("log.flush.interval.ms")
    .not_applicable(NO_FSYNC),
    def(
        "follower.replication.throttled.replicas",
        T::List,
        "",
        "Replicas whose follower-side replication is throttled: * or partition:broker pairs.",
    )
    .throttled_replicas()
    .not_applicable(NO_REPLICAS),
    def("index.interval.bytes", T::Int, "4096", "Kafka's byte spacing between entries of a log file's offset index.")
        .at_least(0)
        .synonym("log.index.interval.bytes")
        .not_applicable(NO_LOG_FILES),
    def(
        "leader.replication.throttled.replicas",
        T::List,
        "",
        "Replicas whose leader-side replication is throttled: * or partition:broker pairs.",
    )
    .throttled_replicas()
    .not_applicable(NO_REPLICAS),
    def(
        "local.retention.bytes",
        T::Long,
        "-2",
        "Size kept on local disk for a tiered topic; -2 follows retention.bytes.",
    )
    .at_least(-2)
    .synonym("log.local.retention.bytes")
    .not_applicable(NO_TIERS),
    def("local.retention.ms", T::Long, "-2", "Time kept on local disk for a tiered topic; -2 follows retention.ms.")
        .at_least(-2)
        .synonym("log.local.retention.ms")
        .not_applicable(NO_TIERS),
    def(
        "max.compaction.lag.ms",
        T::Long,
        "9223372036854775807",
        "Longest a record may wait before compaction must consider it.",
    )
    .at_least(1)
    .synonym("log.cleaner.max.compaction.lag.ms"),
    def("max.message.bytes", T::Int, "1048588", "Largest record batch, after compression, the topic accepts.")
        .at_least(0)
        .synonym("message.max.bytes"),
    def(
        "message.downconversion.enable",
        T::Boolean,
        "true",
        "Whether Kafka rewrites batches into older formats for old consumers.",
    )
    .synonym("log.message.downconversion.enable")
    .not_applicable(ONLY_FORMAT_V2),
    def(
        "message.format.version",
        T::String,
        "3.0-IV1",
        "Deprecated pin of the record format version written to the log.",
    )
    .synonym("log.message.format.version")
    .not_applicable(ONLY_FORMAT_V2),
    def(
        "message.timestamp.after.max.ms",
        T::Long,
        "9223372036854775807",
        "How far ahead of the append time a CreateTime timestamp may be.",
    )
    .at_least(0)
    .synonym("log.message.timestamp.after.max.ms"),
    def(
        "message.timestamp.before.max.ms",
        T::Long,
        "9223372036854775807",
        "How far behind the append time a CreateTime timestamp may be.",
    )
    .at_least(0)
    .synonym("log.message.timestamp.before.max.ms"),
    def(
        "message.timestamp.difference.max.ms",
        T::Long,
        "9223372036854775807",
        "Deprecated: how far from the append time, either way, a CreateTime timestamp may be.",
    )
    .at_least(0)
    .synonym("log.message.timestamp.difference.max.ms"),
    def(
        "message.timestamp.type",
        T::String,
        "CreateTime",
        "Whether records keep the producer's timestamp (CreateTime) or take the append time (LogAppendTime).",
    )
    .one_of(TIMESTAMP_TYPES)
    .synonym("log.message.timestamp.type"),
    def(
        "min.cleanable.dirty.ratio",
        T::Double,
        "0.5",
        "Share of not-yet-compacted bytes that makes a partition due for compaction.",
    )
    .fraction()
    .synonym("log.cleaner.min.cleanable.ratio"),
    def(
        "min.compaction.lag.ms",
        T::Long,
        "0",
        "Shortest time a record stays untouched by compaction after it is written.",
    )
    .at_least(0)
    .synonym("log.cleaner.min.compaction.lag.ms"),
    def(
        "min.insync.replicas",
        T::Int,
        "1",
        "Replicas that must hold a write before Kafka acknowledges it with acks=all.",
    )
    .at_least(1)
    .synonym("min.insync.replicas")
    .not_applicable(NO_REPLICAS),
    def("preallocate", T::Boolean, "false", "Whether Kafka reserves a log file's full size on disk when creating it.")
        .synonym("log.preallocate")
        .not_applicable(NO_LOG_FILES),
    def(
        "remote.log.copy.disable",
        T::Boolean,
        "false",
        "Stops copying a tiered topic's data to remote storage, keeping what is there.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.delete.on.disable",
        T::Boolean,
        "false",
        "Whether switching tiered storage off deletes the remote copy.",
    )
    .not_applicable(NO_TIERS),
    def("remote.storage.enable", T::Boolean, "false", "Turns on Kafka's tiered storage for the topic.")
        .not_applicable(NO_TIERS),
    def(
        "retention.bytes",
        T::Long,
        "-1",
        "Size a partition may reach before its oldest records are removed; -1 means no limit.",
    )
    .at_least(-1)
    .synonym("log.retention.bytes"),
    def(
        "retention.ms",
        T::Long,
        "604800000",
        "How long records are kept before they are removed; -1 keeps them forever.",
    )
    .at_least(-1)
    .synonym("log.retention.ms"),
    def("segment.bytes", T::Int, "1073741824", "Size at which Kafka starts a new log file for a partition.")
        .at_least(14)
        .synonym("log.segment.bytes")
        .not_applicable(NO_LOG_FILES),
    def("segment.index.bytes", T::Int, "10485760", "Size of the offset index Kafka keeps beside each log file.")
        .at_least(4)
        .synonym("log.index.size.max.bytes")
        .not_applicable(NO_LOG_FILES),
    def(
        "segment.jitter.ms",
        T::Long,
        "0",
        "Random time Kafka takes off segment.ms so partitions do not roll together.",
    )
    .at_least(0)
    .synonym("log.roll.jitter.ms")
    .not_applicable(NO_LOG_FILES),
    def("segment.ms", T::Long, "604800000", "Age at which Kafka starts a new log file for a partition.")
        .at_least(1)
        .synonym("log.roll.ms")
        .not_applicable(NO_LOG_FILES),
    def(
        "unclean.leader.election.enable",
        T::Boolean,
        "false",
        "Whether an out-of-sync replica may become leader, losing records.",
    )
    .synonym("unclean.leader.election.enable")
    .not_applicable(NO_LEADERS),
];

/// Every Kafka 4.0 and 4.1 broker config, plus a few that Kafka 4.x does not list (see
/// `config/kafka-4.1/floe-extras.tsv`), sorted by name. ZooKeeper-only configs are left out.
pub static BROKER_CONFIGS: &[ConfigDef] = &[
    def(
        "add.partitions.to.txn.retry.backoff.max.ms",
        T::Int,
        "100",
        "Longest pause between a broker's retries of AddPartitionsToTxn to the coordinator.",
    )
    .read_only()
    .not_applicable(NO_BROKER_CONNECTIONS),
    def(
        "add.partitions.to.txn.retry.backoff.ms",
        T::Int,
        "20",
        "First pause before a broker retries AddPartitionsToTxn to the coordinator.",
    )
    .read_only()
    .not_applicable(NO_BROKER_CONNECTIONS),
    def_null("advertised.listeners", T::String, "Addresses the broker gives clients to reach it.")
        .not_applicable(AGENT_FLAGS),
    def_null("alter.config.policy.class.name", T::Class, "Plug-in that vets config changes.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def(
        "alter.log.dirs.replication.quota.window.num",
        T::Int,
        "11",
        "Samples kept for the quota on moving replicas between log directories.",
    )
    .read_only()
    .not_applicable(NO_LOG_FILES),
    def(
        "alter.log.dirs.replication.quota.window.size.seconds",
        T::Int,
        "1",
        "Length of one sample of the quota on moving replicas between log directories.",
    )
    .read_only()
    .not_applicable(NO_LOG_FILES),
    def("authorizer.class.name", T::String, "", "Plug-in that decides ACL checks; empty turns authorization off.")
        .read_only()
        .not_applicable("Floe's ACLs are built in, not a plug-in"),
    def(
        "auto.create.topics.enable",
        T::Boolean,
        "true",
        "Whether a Metadata or Produce request for a missing topic creates it.",
    )
    .read_only(),
    def(
        "auto.leader.rebalance.enable",
        T::Boolean,
        "true",
        "Whether leadership drifts back to preferred replicas in the background.",
    )
    .read_only()
    .not_applicable(NO_LEADERS),
    def("background.threads", T::Int, "10", "Threads for Kafka's background housekeeping tasks.")
        .at_least(1)
        .not_applicable(NO_THREAD_POOLS),
    def(
        "broker.heartbeat.interval.ms",
        T::Int,
        "2000",
        "How often a broker sends a heartbeat to the KRaft controller.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def("broker.id", T::Int, "-1", "Numeric id of this broker; Floe reports the agent's id.").read_only(),
    def_null("broker.rack", T::String, "Rack or zone of this broker; Floe reports the agent's zone.").read_only(),
    def(
        "broker.session.timeout.ms",
        T::Int,
        "9000",
        "How long a broker may go without a heartbeat before the controller fences it.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def_null("client.quota.callback.class", T::Class, "Plug-in that computes client quotas.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def("compression.gzip.level", T::Int, "-1", "Cluster default for the topic config of the same name.")
        .gzip_level()
        .not_applicable(CODEC_DEFAULT_LEVELS),
    def("compression.lz4.level", T::Int, "9", "Cluster default for the topic config of the same name.")
        .between(1, 17)
        .not_applicable(CODEC_DEFAULT_LEVELS),
    def("compression.type", T::String, "producer", "Cluster default for the topic config of the same name.")
        .one_of(COMPRESSION_TYPES),
    def("compression.zstd.level", T::Int, "3", "Cluster default for the topic config of the same name.")
        .between(-131_072, 22)
        .not_applicable(CODEC_DEFAULT_LEVELS),
    def(
        "connection.failed.authentication.delay.ms",
        T::Int,
        "100",
        "Pause before the broker closes a connection whose authentication failed.",
    )
    .read_only()
    .not_applicable("agents wait a fixed second before answering a failed authentication"),
    def("connections.max.idle.ms", T::Long, "600000", "Idle time after which the broker closes a client connection.")
        .read_only(),
    def(
        "connections.max.reauth.ms",
        T::Long,
        "0",
        "Longest a SASL authentication lasts before the client must repeat it; 0 means no limit.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def("controlled.shutdown.enable", T::Boolean, "true", "Whether a stopping broker hands its leaderships off first.")
        .read_only()
        .not_applicable(NO_LEADERS),
    def("controller.listener.names", T::String, "", "Listeners used to reach the KRaft controllers.")
        .read_only()
        .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.append.linger.ms",
        T::Int,
        "25",
        "How long the KRaft leader gathers writes before appending them to its log.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def("controller.quorum.bootstrap.servers", T::List, "", "Addresses used to discover the KRaft controller quorum.")
        .read_only()
        .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.election.backoff.max.ms",
        T::Int,
        "1000",
        "Longest random pause before a KRaft voter starts a new election.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.election.timeout.ms",
        T::Int,
        "1000",
        "How long a KRaft voter waits to hear from a leader before calling an election.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.fetch.timeout.ms",
        T::Int,
        "2000",
        "Time without a successful fetch from the KRaft leader before a voter seeks a new one.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.request.timeout.ms",
        T::Int,
        "2000",
        "Timeout of the requests KRaft quorum members send each other.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "controller.quorum.retry.backoff.ms",
        T::Int,
        "20",
        "Pause before a failed KRaft quorum request is sent again.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_KRAFT),
    def("controller.quorum.voters", T::List, "", "Static id@host:port list of KRaft controller voters.")
        .read_only()
        .not_applicable(NO_KRAFT),
    def("controller.quota.window.num", T::Int, "11", "Samples kept for the controller mutation rate quota.")
        .read_only()
        .not_applicable("Floe enforces tenant quotas with its own accounting"),
    def(
        "controller.quota.window.size.seconds",
        T::Int,
        "1",
        "Length of one sample of the controller mutation rate quota.",
    )
    .read_only()
    .not_applicable("Floe enforces tenant quotas with its own accounting"),
    def(
        "controller.socket.timeout.ms",
        T::Int,
        "30000",
        "Socket timeout of the channel between the KRaft controller and brokers.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def_null("create.topic.policy.class.name", T::Class, "Plug-in that vets topic creations.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def("default.replication.factor", T::Int, "1", "Replication factor for topics created without one.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def(
        "delegation.token.expiry.check.interval.ms",
        T::Long,
        "3600000",
        "How often the broker looks for expired delegation tokens to remove.",
    )
    .read_only()
    .not_applicable(NO_DELEGATION_TOKENS),
    def(
        "delegation.token.expiry.time.ms",
        T::Long,
        "86400000",
        "How long a delegation token lives before it must be renewed.",
    )
    .at_least(1)
    .read_only()
    .not_applicable(NO_DELEGATION_TOKENS),
    def("delegation.token.max.lifetime.ms", T::Long, "604800000", "Longest a delegation token may be renewed for.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_DELEGATION_TOKENS),
    def_null("delegation.token.secret.key", T::Password, "Secret that signs delegation tokens.")
        .read_only()
        .not_applicable(NO_DELEGATION_TOKENS),
    def(
        "delete.records.purgatory.purge.interval.requests",
        T::Int,
        "1",
        "How often Kafka sweeps completed DeleteRecords waits.",
    )
    .read_only()
    .not_applicable(NO_PURGATORY),
    def("delete.topic.enable", T::Boolean, "true", "Whether DeleteTopics is allowed.").read_only(),
    def_null(
        "early.start.listeners",
        T::String,
        "Listeners that accept connections before the node has finished starting.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def("fetch.max.bytes", T::Int, "57671680", "Most bytes one Fetch response may carry.").at_least(1024).read_only(),
    def("fetch.purgatory.purge.interval.requests", T::Int, "1000", "How often Kafka sweeps completed Fetch waits.")
        .read_only()
        .not_applicable(NO_PURGATORY),
    def(
        "floe.share.auto.offset.reset",
        T::String,
        "latest",
        "Where share groups start reading a partition they have not read before, unless a group sets share.auto.offset.reset.",
    )
    .share_offset_reset(),
    def(
        "floe.share.isolation.level",
        T::String,
        "read_uncommitted",
        "Whether share groups deliver records of open and aborted transactions, unless a group sets share.isolation.level.",
    )
    .one_of(&["read_committed", "read_uncommitted"]),
    def(
        "follower.replication.throttled.rate",
        T::Long,
        "9223372036854775807",
        "Byte rate cap for throttled follower replication.",
    )
    .at_least(0)
    .not_applicable(NO_REPLICAS),
    def(
        "group.consumer.assignors",
        T::List,
        "uniform,range",
        "Server-side assignors consumer-protocol (KIP-848) groups may use; the first is the default.",
    )
    .read_only()
    .not_applicable("the group coordinator always offers the uniform and range assignors"),
    // The group settings Floe applies are read by the coordinator on every request, so unlike
    // Kafka they can be changed at runtime (cluster-wide).
    def(
        "group.consumer.heartbeat.interval.ms",
        T::Int,
        "5000",
        "How often consumer-protocol (KIP-848) members heartbeat.",
    )
    .at_least(1),
    def(
        "group.consumer.max.heartbeat.interval.ms",
        T::Int,
        "15000",
        "Highest heartbeat interval a consumer-protocol group may set for itself.",
    )
    .at_least(1),
    def(
        "group.consumer.max.session.timeout.ms",
        T::Int,
        "60000",
        "Longest session timeout a consumer-protocol group may set for itself.",
    )
    .at_least(1),
    def("group.consumer.max.size", T::Int, "2147483647", "Most members one consumer-protocol group may have.")
        .at_least(1),
    def(
        "group.consumer.migration.policy",
        T::String,
        "bidirectional",
        "Whether non-empty groups may switch between the classic and consumer protocols.",
    )
    .read_only()
    .not_applicable("Floe moves a group between the classic and consumer protocols only while it is empty"),
    def(
        "group.consumer.min.heartbeat.interval.ms",
        T::Int,
        "5000",
        "Lowest heartbeat interval a consumer-protocol group may set for itself.",
    )
    .at_least(1),
    def(
        "group.consumer.min.session.timeout.ms",
        T::Int,
        "45000",
        "Shortest session timeout a consumer-protocol group may set for itself.",
    )
    .at_least(1),
    def(
        "group.consumer.session.timeout.ms",
        T::Int,
        "45000",
        "How long a consumer-protocol member may go without a heartbeat before it is removed.",
    )
    .at_least(1),
    def(
        "group.coordinator.append.linger.ms",
        T::Int,
        "5",
        "How long the group coordinator gathers writes before appending them to its topic.",
    )
    .read_only()
    .not_applicable(NO_INTERNAL_TOPICS),
    def(
        "group.coordinator.rebalance.protocols",
        T::List,
        "classic,consumer,streams",
        "Group protocols the coordinator serves: classic, consumer, share or streams.",
    )
    .list_of(&["classic", "consumer", "share", "streams"])
    .read_only()
    .not_applicable("Floe always serves the classic and consumer group protocols and no others"),
    def("group.coordinator.threads", T::Int, "4", "Threads that run the group coordinator's work.")
        .read_only()
        .not_applicable(NO_THREAD_POOLS),
    def(
        "group.initial.rebalance.delay.ms",
        T::Int,
        "3000",
        "Wait for more members before a new group's first rebalance.",
    )
    .at_least(0),
    def("group.max.session.timeout.ms", T::Int, "1800000", "Longest session timeout a group member may ask for.")
        .at_least(1),
    def("group.max.size", T::Int, "2147483647", "Most members one consumer group may have (Floe caps it at 10000).")
        .at_least(1),
    def("group.min.session.timeout.ms", T::Int, "6000", "Shortest session timeout a group member may ask for.")
        .at_least(1),
    def(
        "group.share.assignors",
        T::List,
        "simple",
        "Assignors that spread partitions among the members of a share group.",
    )
    .read_only()
    .not_applicable(ONE_SHARE_ASSIGNOR),
    def(
        "group.share.delivery.count.limit",
        T::Int,
        "5",
        "Times a record is delivered to share consumers before it is given up on.",
    )
    .between(2, 10),
    def(
        "group.share.heartbeat.interval.ms",
        T::Int,
        "5000",
        "How often the members of a share group send a heartbeat.",
    )
    .at_least(1),
    def(
        "group.share.max.groups",
        T::Short,
        "10",
        "Most share groups the cluster may hold (Kafka 4.0 only; gone in 4.1).",
    )
    .read_only()
    .not_applicable("Floe bounds share groups by the groups quota of each tenant"),
    def(
        "group.share.max.heartbeat.interval.ms",
        T::Int,
        "15000",
        "Highest heartbeat interval a share group may set for itself.",
    )
    .at_least(1),
    def(
        "group.share.max.record.lock.duration.ms",
        T::Int,
        "60000",
        "Longest record lock duration a share group may set for itself.",
    )
    .at_least(1),
    def(
        "group.share.max.session.timeout.ms",
        T::Int,
        "60000",
        "Longest session timeout a share group may set for itself.",
    )
    .at_least(1),
    def("group.share.max.share.sessions", T::Int, "2000", "Most share fetch sessions the broker keeps at once.")
        .read_only()
        .not_applicable("agents keep at most 2,000 share sessions each, 500 of them for one tenant"),
    def("group.share.max.size", T::Int, "200", "Most members a single share group may have.").between(1, 1000),
    def(
        "group.share.min.heartbeat.interval.ms",
        T::Int,
        "5000",
        "Lowest heartbeat interval a share group may set for itself.",
    )
    .at_least(1),
    def(
        "group.share.min.record.lock.duration.ms",
        T::Int,
        "15000",
        "Shortest record lock duration a share group may set for itself.",
    )
    .at_least(1),
    def(
        "group.share.min.session.timeout.ms",
        T::Int,
        "45000",
        "Shortest session timeout a share group may set for itself.",
    )
    .at_least(1),
    def(
        "group.share.partition.max.record.locks",
        T::Int,
        "2000",
        "Most records of one partition that share consumers may hold locked at once.",
    )
    .between(100, 10000),
    def(
        "group.share.record.lock.duration.ms",
        T::Int,
        "30000",
        "How long a share consumer holds a record before it may go to another member.",
    )
    .between(1000, 3600000),
    def(
        "group.share.session.timeout.ms",
        T::Int,
        "45000",
        "How long a share group member may go without a heartbeat before it is removed.",
    )
    .at_least(1),
    def(
        "group.streams.heartbeat.interval.ms",
        T::Int,
        "5000",
        "How often the members of a streams group (KIP-1071) send a heartbeat.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.max.heartbeat.interval.ms",
        T::Int,
        "15000",
        "Highest heartbeat interval a streams group may set for itself.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.max.session.timeout.ms",
        T::Int,
        "60000",
        "Longest session timeout a streams group may set for itself.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def("group.streams.max.size", T::Int, "2147483647", "Most members one streams group may have.")
        .read_only()
        .not_applicable(NO_STREAMS_GROUPS),
    def("group.streams.max.standby.replicas", T::Int, "2", "Most standby task replicas a streams group may ask for.")
        .read_only()
        .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.min.heartbeat.interval.ms",
        T::Int,
        "5000",
        "Lowest heartbeat interval a streams group may set for itself.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.min.session.timeout.ms",
        T::Int,
        "45000",
        "Shortest session timeout a streams group may set for itself.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.num.standby.replicas",
        T::Int,
        "0",
        "Standby task replicas a streams group gets unless it sets its own.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "group.streams.session.timeout.ms",
        T::Int,
        "45000",
        "How long a streams group member may go without a heartbeat before it is removed.",
    )
    .read_only()
    .not_applicable(NO_STREAMS_GROUPS),
    def(
        "initial.broker.registration.timeout.ms",
        T::Int,
        "60000",
        "How long a starting broker waits to register with the KRaft controller.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def_null("inter.broker.listener.name", T::String, "Listener brokers use to talk to each other.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def(
        "kafka.metrics.polling.interval.secs",
        T::Int,
        "10",
        "How often the reporters in kafka.metrics.reporters poll the metrics.",
    )
    .read_only()
    .not_applicable(METRICS_ENDPOINT),
    def("kafka.metrics.reporters", T::List, "", "Reporter plug-ins for the broker's older (Yammer) metrics.")
        .read_only()
        .not_applicable(METRICS_ENDPOINT),
    def(
        "leader.imbalance.check.interval.seconds",
        T::Long,
        "300",
        "How often Kafka checks whether leaders should move back.",
    )
    .at_least(1)
    .read_only()
    .not_applicable(NO_LEADERS),
    def("leader.imbalance.per.broker.percentage", T::Int, "10", "Leader skew on a broker that triggers a rebalance.")
        .read_only()
        .not_applicable(NO_LEADERS),
    def(
        "leader.replication.throttled.rate",
        T::Long,
        "9223372036854775807",
        "Byte rate cap for throttled leader replication.",
    )
    .at_least(0)
    .not_applicable(NO_REPLICAS),
    def(
        "listener.security.protocol.map",
        T::String,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Security protocol of each named listener.",
    )
    .not_applicable(AGENT_FLAGS),
    def("listeners", T::String, "PLAINTEXT://:9092", "Addresses the broker listens on.").not_applicable(AGENT_FLAGS),
    def("log.cleaner.backoff.ms", T::Long, "15000", "Sleep of Kafka's log cleaner when it finds nothing to compact.")
        .at_least(0)
        .not_applicable(COMPACTION_JOB),
    def(
        "log.cleaner.dedupe.buffer.size",
        T::Long,
        "134217728",
        "Memory Kafka's log cleaner uses to find duplicate keys.",
    )
    .not_applicable(COMPACTION_JOB),
    def("log.cleaner.delete.retention.ms", T::Long, "86400000", "Cluster default for delete.retention.ms.").at_least(0),
    def("log.cleaner.enable", T::Boolean, "true", "Whether compaction runs at all.").read_only(),
    def("log.cleaner.io.buffer.load.factor", T::Double, "0.9", "Fill factor of the log cleaner's dedupe hash table.")
        .not_applicable(COMPACTION_JOB),
    def("log.cleaner.io.buffer.size", T::Int, "524288", "I/O buffer memory of Kafka's log cleaner.")
        .at_least(0)
        .not_applicable(COMPACTION_JOB),
    def(
        "log.cleaner.io.max.bytes.per.second",
        T::Double,
        "1.7976931348623157E308",
        "Disk bandwidth cap of Kafka's log cleaner.",
    )
    .not_applicable(COMPACTION_JOB),
    def(
        "log.cleaner.max.compaction.lag.ms",
        T::Long,
        "9223372036854775807",
        "Cluster default for max.compaction.lag.ms.",
    )
    .at_least(1),
    def("log.cleaner.min.cleanable.ratio", T::Double, "0.5", "Cluster default for min.cleanable.dirty.ratio.")
        .fraction(),
    def("log.cleaner.min.compaction.lag.ms", T::Long, "0", "Cluster default for min.compaction.lag.ms.").at_least(0),
    def("log.cleaner.threads", T::Int, "1", "Threads Kafka's log cleaner runs.")
        .at_least(0)
        .not_applicable(COMPACTION_JOB),
    def("log.cleanup.policy", T::List, "delete", "Cluster default for cleanup.policy.").list_of(CLEANUP_POLICIES),
    def("log.dir", T::String, "/tmp/kafka-logs", "Directory for log data when log.dirs is unset.")
        .read_only()
        .not_applicable(NO_LOG_FILES),
    def(
        "log.dir.failure.timeout.ms",
        T::Long,
        "30000",
        "How long a broker may fail to report a bad log directory before it shuts down.",
    )
    .read_only()
    .not_applicable(NO_LOG_FILES),
    def_null("log.dirs", T::String, "Comma-separated directories for log data.")
        .read_only()
        .not_applicable(NO_LOG_FILES),
    def("log.flush.interval.messages", T::Long, "9223372036854775807", "Cluster default for flush.messages.")
        .at_least(1)
        .not_applicable(NO_FSYNC),
    def_null(
        "log.flush.interval.ms",
        T::Long,
        "Cluster default for flush.ms; unset falls back to log.flush.scheduler.interval.ms.",
    )
    .at_least(0)
    .not_applicable(NO_FSYNC),
    def(
        "log.flush.offset.checkpoint.interval.ms",
        T::Int,
        "60000",
        "How often Kafka records the last flushed offset on disk.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_FSYNC),
    def(
        "log.flush.scheduler.interval.ms",
        T::Long,
        "9223372036854775807",
        "How often Kafka checks for logs due a flush.",
    )
    .read_only()
    .not_applicable(NO_FSYNC),
    def(
        "log.flush.start.offset.checkpoint.interval.ms",
        T::Int,
        "60000",
        "How often Kafka records log start offsets on disk.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_LOG_FILES),
    def("log.index.interval.bytes", T::Int, "4096", "Cluster default for index.interval.bytes.")
        .at_least(0)
        .not_applicable(NO_LOG_FILES),
    def("log.index.size.max.bytes", T::Int, "10485760", "Cluster default for segment.index.bytes.")
        .at_least(4)
        .not_applicable(NO_LOG_FILES),
    def("log.local.retention.bytes", T::Long, "-2", "Cluster default for local.retention.bytes.")
        .at_least(-2)
        .not_applicable(NO_TIERS),
    def("log.local.retention.ms", T::Long, "-2", "Cluster default for local.retention.ms.")
        .at_least(-2)
        .not_applicable(NO_TIERS),
    def("log.message.downconversion.enable", T::Boolean, "true", "Cluster default for message.downconversion.enable.")
        .not_applicable(ONLY_FORMAT_V2),
    def("log.message.format.version", T::String, "3.0-IV1", "Cluster default for message.format.version.")
        .read_only()
        .not_applicable(ONLY_FORMAT_V2),
    def(
        "log.message.timestamp.after.max.ms",
        T::Long,
        "9223372036854775807",
        "Cluster default for message.timestamp.after.max.ms.",
    )
    .at_least(0),
    def(
        "log.message.timestamp.before.max.ms",
        T::Long,
        "9223372036854775807",
        "Cluster default for message.timestamp.before.max.ms.",
    )
    .at_least(0),
    def(
        "log.message.timestamp.difference.max.ms",
        T::Long,
        "9223372036854775807",
        "Cluster default for message.timestamp.difference.max.ms.",
    )
    .at_least(0),
    def("log.message.timestamp.type", T::String, "CreateTime", "Cluster default for message.timestamp.type.")
        .one_of(TIMESTAMP_TYPES),
    def("log.preallocate", T::Boolean, "false", "Cluster default for preallocate.").not_applicable(NO_LOG_FILES),
    def("log.retention.bytes", T::Long, "-1", "Cluster default for retention.bytes.").at_least(-1),
    def("log.retention.check.interval.ms", T::Long, "300000", "How often retention looks for records to remove.")
        .at_least(1),
    def(
        "log.retention.hours",
        T::Int,
        "168",
        "Cluster default for retention.ms, in hours; used when the minutes and ms forms are unset.",
    )
    .at_least(-1)
    .read_only(),
    def_null(
        "log.retention.minutes",
        T::Int,
        "Cluster default for retention.ms, in minutes; used when log.retention.ms is unset.",
    )
    .at_least(-1)
    .read_only(),
    def_null(
        "log.retention.ms",
        T::Long,
        "Cluster default for retention.ms; unset falls back to the minutes and hours forms.",
    )
    .at_least(-1),
    def("log.roll.hours", T::Int, "168", "Cluster default for segment.ms, in hours; used when log.roll.ms is unset.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_LOG_FILES),
    def(
        "log.roll.jitter.hours",
        T::Int,
        "0",
        "Cluster default for segment.jitter.ms, in hours; used when log.roll.jitter.ms is unset.",
    )
    .at_least(0)
    .read_only()
    .not_applicable(NO_LOG_FILES),
    def_null("log.roll.jitter.ms", T::Long, "Cluster default for segment.jitter.ms.")
        .at_least(0)
        .not_applicable(NO_LOG_FILES),
    def_null("log.roll.ms", T::Long, "Cluster default for segment.ms.").at_least(1).not_applicable(NO_LOG_FILES),
    def("log.segment.bytes", T::Int, "1073741824", "Cluster default for segment.bytes.")
        .at_least(14)
        .not_applicable(NO_LOG_FILES),
    def(
        "log.segment.delete.delay.ms",
        T::Long,
        "60000",
        "How long an object no index entry refers to is kept before garbage collection deletes it.",
    )
    .at_least(0),
    def("max.connection.creation.rate", T::Int, "2147483647", "New connections per second the broker accepts.")
        .at_least(0)
        .not_applicable("agents limit how many connections are held, not how fast they are made"),
    def("max.connections", T::Int, "2147483647", "Most client connections the broker holds open at once.")
        .at_least(0)
        .not_applicable(CONNECTION_FLAGS),
    def("max.connections.per.ip", T::Int, "2147483647", "Most connections one client address may hold open.")
        .at_least(0)
        .not_applicable(CONNECTION_FLAGS),
    def(
        "max.connections.per.ip.overrides",
        T::String,
        "",
        "Per-address exceptions to max.connections.per.ip, as host:count pairs.",
    )
    .not_applicable(CONNECTION_FLAGS),
    def(
        "max.incremental.fetch.session.cache.slots",
        T::Int,
        "1000",
        "Incremental fetch sessions (KIP-227) the broker keeps at once.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def(
        "max.request.partition.size.limit",
        T::Int,
        "2000",
        "Most partitions one DescribeTopicPartitions response may carry.",
    )
    .read_only()
    .not_applicable("Floe does not serve DescribeTopicPartitions, the request this limits"),
    def("message.max.bytes", T::Int, "1048588", "Cluster default for max.message.bytes.").at_least(0),
    def_null("metadata.log.dir", T::String, "Directory for the KRaft metadata log.")
        .read_only()
        .not_applicable(NO_KRAFT),
    def(
        "metadata.log.max.record.bytes.between.snapshots",
        T::Long,
        "20971520",
        "Bytes appended to the KRaft metadata log before a new snapshot is taken.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "metadata.log.max.snapshot.interval.ms",
        T::Long,
        "3600000",
        "Longest time between KRaft metadata snapshots while new records arrive.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def("metadata.log.segment.bytes", T::Int, "1073741824", "Size at which the KRaft metadata log starts a new file.")
        .at_least(8_388_608)
        .read_only()
        .not_applicable(NO_KRAFT),
    def("metadata.log.segment.ms", T::Long, "604800000", "Age at which the KRaft metadata log starts a new file.")
        .read_only()
        .not_applicable(NO_KRAFT),
    def(
        "metadata.max.idle.interval.ms",
        T::Int,
        "500",
        "How often the active controller appends a no-op record to an idle metadata log.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "metadata.max.retention.bytes",
        T::Long,
        "104857600",
        "Size the KRaft metadata log may reach before old files and snapshots go.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def(
        "metadata.max.retention.ms",
        T::Long,
        "604800000",
        "How long old KRaft metadata log files and snapshots are kept.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def("metric.reporters", T::List, "", "Plug-ins that receive Kafka's metrics.").not_applicable(METRICS_ENDPOINT),
    def("metrics.num.samples", T::Int, "2", "Samples kept per metric window.")
        .at_least(1)
        .read_only()
        .not_applicable(METRICS_ENDPOINT),
    def("metrics.recording.level", T::String, "INFO", "Detail level of recorded metrics.")
        .one_of(&["INFO", "DEBUG", "TRACE"])
        .read_only()
        .not_applicable(METRICS_ENDPOINT),
    def("metrics.sample.window.ms", T::Long, "30000", "Length of one metric sample window.")
        .at_least(1)
        .read_only()
        .not_applicable(METRICS_ENDPOINT),
    def("min.insync.replicas", T::Int, "1", "Cluster default for min.insync.replicas.")
        .at_least(1)
        .not_applicable(NO_REPLICAS),
    def("node.id", T::Int, "-1", "Numeric id of this node; Floe reports the agent's id.").read_only(),
    def("num.io.threads", T::Int, "8", "Threads that execute requests.").at_least(1).not_applicable(NO_THREAD_POOLS),
    def("num.network.threads", T::Int, "3", "Threads that read and write sockets.")
        .at_least(1)
        .not_applicable(NO_THREAD_POOLS),
    def("num.partitions", T::Int, "1", "Partition count for topics created without one.").at_least(1).read_only(),
    def(
        "num.recovery.threads.per.data.dir",
        T::Int,
        "1",
        "Threads per log directory for startup recovery and shutdown flush.",
    )
    .at_least(1)
    .not_applicable(NO_LOG_FILES),
    def_null("num.replica.alter.log.dirs.threads", T::Int, "Threads that move replicas between log directories.")
        .read_only()
        .not_applicable(NO_LOG_FILES),
    def("num.replica.fetchers", T::Int, "1", "Threads a broker uses to replicate from each leader.")
        .not_applicable(NO_REPLICAS),
    def("offset.metadata.max.bytes", T::Int, "4096", "Largest metadata string a committed offset may carry.")
        .read_only(),
    def("offsets.commit.required.acks", T::Short, "-1", "Deprecated: acks needed before an offset commit succeeds.")
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def(
        "offsets.commit.timeout.ms",
        T::Int,
        "5000",
        "How long an offset commit waits for the offsets topic's replicas.",
    )
    .read_only()
    .not_applicable(NO_INTERNAL_TOPICS),
    def("offsets.load.buffer.size", T::Int, "5242880", "Read buffer for loading the offsets topic into memory.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def("offsets.retention.check.interval.ms", T::Long, "600000", "How often expired committed offsets are removed.")
        .at_least(1)
        .read_only(),
    def("offsets.retention.minutes", T::Int, "10080", "How long an empty group's committed offsets are kept.")
        .at_least(1),
    def("offsets.topic.compression.codec", T::Int, "0", "Codec for the offsets topic.")
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def("offsets.topic.num.partitions", T::Int, "50", "Partition count of the offsets topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def("offsets.topic.replication.factor", T::Short, "3", "Replication factor of the offsets topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def("offsets.topic.segment.bytes", T::Int, "104857600", "Log file size of the offsets topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def(
        "principal.builder.class",
        T::Class,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        "Plug-in that turns an authenticated session into a principal.",
    )
    .read_only()
    .not_applicable(NO_PLUGINS),
    def("process.roles", T::List, "", "KRaft roles this node plays: broker, controller or both.")
        .list_of_or_empty(&["broker", "controller"])
        .read_only()
        .not_applicable(NO_KRAFT),
    def("producer.id.expiration.check.interval.ms", T::Int, "600000", "How often idle producer ids are removed.")
        .at_least(1)
        .read_only(),
    def(
        "producer.id.expiration.ms",
        T::Int,
        "86400000",
        "Idle time after which a producer id's sequence state is dropped.",
    )
    .at_least(1),
    def(
        "producer.purgatory.purge.interval.requests",
        T::Int,
        "1000",
        "How often Kafka sweeps completed Produce waits.",
    )
    .read_only()
    .not_applicable(NO_PURGATORY),
    def(
        "queued.max.request.bytes",
        T::Long,
        "-1",
        "Bytes of queued requests before the broker stops reading; -1 means no cap.",
    )
    .read_only()
    .not_applicable(NO_THREAD_POOLS),
    def("queued.max.requests", T::Int, "500", "Requests queued for I/O threads before the broker stops reading.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_THREAD_POOLS),
    def("quota.window.num", T::Int, "11", "Samples kept for client quota windows.")
        .at_least(1)
        .read_only()
        .not_applicable("Floe enforces tenant quotas with its own accounting"),
    def("quota.window.size.seconds", T::Int, "1", "Length of one client quota sample.")
        .at_least(1)
        .read_only()
        .not_applicable("Floe enforces tenant quotas with its own accounting"),
    def(
        "remote.fetch.max.wait.ms",
        T::Int,
        "500",
        "Longest a fetch of tiered data waits for enough bytes before answering.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.list.offsets.request.timeout.ms",
        T::Long,
        "30000",
        "Timeout of offset lookups that must search remote storage.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.index.file.cache.total.size.bytes",
        T::Long,
        "1073741824",
        "Disk space for cached index files of remote log segments.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.copier.thread.pool.size",
        T::Int,
        "10",
        "Threads that copy finished log files to remote storage.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.copy.max.bytes.per.second",
        T::Long,
        "9223372036854775807",
        "Byte rate cap for copying log files to remote storage.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.copy.quota.window.num",
        T::Int,
        "11",
        "Samples kept for the remote storage copy rate quota.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.copy.quota.window.size.seconds",
        T::Int,
        "1",
        "Length of one sample of the remote storage copy rate quota.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.expiration.thread.pool.size",
        T::Int,
        "10",
        "Threads that delete expired data from remote storage.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.fetch.max.bytes.per.second",
        T::Long,
        "9223372036854775807",
        "Byte rate cap for reading data back from remote storage.",
    )
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.fetch.quota.window.num",
        T::Int,
        "11",
        "Samples kept for the remote storage read rate quota.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.fetch.quota.window.size.seconds",
        T::Int,
        "1",
        "Length of one sample of the remote storage read rate quota.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.manager.task.interval.ms",
        T::Long,
        "30000",
        "How often the remote log manager runs its copy and cleanup tasks.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def("remote.log.manager.thread.pool.size", T::Int, "2", "Threads of the remote log manager's task scheduler.")
        .read_only()
        .not_applicable(NO_TIERS),
    def(
        "remote.log.metadata.custom.metadata.max.bytes",
        T::Int,
        "128",
        "Largest custom metadata a remote storage plug-in may attach to a segment.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.metadata.manager.class.name",
        T::String,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "Plug-in that stores metadata about remote log segments.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def_null(
        "remote.log.metadata.manager.class.path",
        T::String,
        "Class path from which the remote log metadata plug-in is loaded.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.metadata.manager.impl.prefix",
        T::String,
        "rlmm.config.",
        "Prefix of the configs passed on to the remote log metadata plug-in.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def_null(
        "remote.log.metadata.manager.listener.name",
        T::String,
        "Listener the remote log metadata plug-in uses to reach the brokers.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.reader.max.pending.tasks",
        T::Int,
        "100",
        "Most remote storage reads that may wait for a reader thread.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def("remote.log.reader.threads", T::Int, "10", "Threads that read data back from remote storage.")
        .not_applicable(NO_TIERS),
    def_null(
        "remote.log.storage.manager.class.name",
        T::String,
        "Plug-in that copies log segments to and from remote storage.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def_null(
        "remote.log.storage.manager.class.path",
        T::String,
        "Class path from which the remote storage plug-in is loaded.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def(
        "remote.log.storage.manager.impl.prefix",
        T::String,
        "rsm.config.",
        "Prefix of the configs passed on to the remote storage plug-in.",
    )
    .read_only()
    .not_applicable(NO_TIERS),
    def("remote.log.storage.system.enable", T::Boolean, "false", "Whether the broker supports tiered storage at all.")
        .read_only()
        .not_applicable(NO_TIERS),
    def(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        T::Long,
        "9223372036854775807",
        "Byte rate cap for moving replicas between log directories.",
    )
    .at_least(0)
    .not_applicable(NO_LOG_FILES),
    def("replica.fetch.backoff.ms", T::Int, "1000", "Pause after a failed replica fetch.")
        .at_least(0)
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replica.fetch.max.bytes", T::Int, "1048576", "Bytes a follower fetches per partition.")
        .at_least(0)
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replica.fetch.min.bytes", T::Int, "1", "Bytes a follower waits for in one fetch.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replica.fetch.response.max.bytes", T::Int, "10485760", "Bytes a follower fetches in one response.")
        .at_least(0)
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replica.fetch.wait.max.ms", T::Int, "500", "Longest a follower fetch waits for data.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def(
        "replica.high.watermark.checkpoint.interval.ms",
        T::Long,
        "5000",
        "How often replicas record their high watermark on disk.",
    )
    .read_only()
    .not_applicable(NO_REPLICAS),
    def("replica.lag.time.max.ms", T::Long, "30000", "How long a follower may lag before it leaves the in-sync set.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def_null("replica.selector.class", T::Class, "Plug-in that picks the replica a consumer fetches from.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def("replica.socket.receive.buffer.bytes", T::Int, "65536", "Socket receive buffer for replica fetches.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replica.socket.timeout.ms", T::Int, "30000", "Socket timeout for replica fetches.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def("replication.quota.window.num", T::Int, "11", "Samples kept for the replication throttle quota.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def(
        "replication.quota.window.size.seconds",
        T::Int,
        "1",
        "Length of one sample of the replication throttle quota.",
    )
    .read_only()
    .not_applicable(NO_REPLICAS),
    def("request.timeout.ms", T::Int, "30000", "Timeout of requests the broker sends to other nodes.")
        .read_only()
        .not_applicable(NO_REPLICAS),
    def_null(
        "sasl.client.callback.handler.class",
        T::Class,
        "Callback handler plug-in for SASL logins the broker makes as a client.",
    )
    .read_only()
    .not_applicable(NO_PLUGINS),
    def("sasl.enabled.mechanisms", T::List, "GSSAPI", "SASL mechanisms the broker offers clients.")
        .not_applicable(AGENT_FLAGS),
    def_null("sasl.jaas.config", T::Password, "JAAS login settings for SASL.").not_applicable(AGENT_FLAGS),
    def("sasl.kerberos.kinit.cmd", T::String, "/usr/bin/kinit", "Path of the kinit command used for Kerberos logins.")
        .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.kerberos.min.time.before.relogin",
        T::Long,
        "60000",
        "Shortest pause between attempts to refresh the Kerberos ticket.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.kerberos.principal.to.local.rules",
        T::List,
        "DEFAULT",
        "Rules that turn a Kerberos principal into a short user name.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.kerberos.service.name", T::String, "Kerberos principal name the broker runs as.")
        .not_applicable(AGENT_FLAGS),
    def(
        "sasl.kerberos.ticket.renew.jitter",
        T::Double,
        "0.05",
        "Random share added to the time at which the Kerberos ticket is renewed.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.kerberos.ticket.renew.window.factor",
        T::Double,
        "0.8",
        "Share of the Kerberos ticket's lifetime after which it is renewed.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.login.callback.handler.class", T::Class, "Callback handler plug-in for SASL login modules.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def_null("sasl.login.class", T::Class, "Plug-in class that performs SASL logins.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def_null(
        "sasl.login.connect.timeout.ms",
        T::Int,
        "Connect timeout to an external login provider (OAUTHBEARER only).",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.login.read.timeout.ms", T::Int, "Read timeout from an external login provider (OAUTHBEARER only).")
        .read_only()
        .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.refresh.buffer.seconds",
        T::Short,
        "300",
        "Time left on a login credential below which it is refreshed.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.refresh.min.period.seconds",
        T::Short,
        "60",
        "Shortest pause between refreshes of a login credential.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.refresh.window.factor",
        T::Double,
        "0.8",
        "Share of a login credential's lifetime after which it is refreshed.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.refresh.window.jitter",
        T::Double,
        "0.05",
        "Random share added to the time at which a login credential is refreshed.",
    )
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.retry.backoff.max.ms",
        T::Long,
        "10000",
        "Longest pause between retries of a login to an external provider.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.login.retry.backoff.ms",
        T::Long,
        "100",
        "First pause before a failed login to an external provider is retried.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.mechanism.controller.protocol",
        T::String,
        "GSSAPI",
        "SASL mechanism used on connections to the KRaft controllers.",
    )
    .read_only()
    .not_applicable(NO_KRAFT),
    def("sasl.mechanism.inter.broker.protocol", T::String, "GSSAPI", "SASL mechanism brokers use with each other.")
        .not_applicable(NO_REPLICAS),
    def(
        "sasl.oauthbearer.assertion.algorithm",
        T::String,
        "RS256",
        "Signing algorithm of the JWT assertion sent to the OAuth token endpoint.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.claim.aud",
        T::String,
        "Audience (aud) claim of the JWT assertion sent to the OAuth token endpoint.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.assertion.claim.exp.seconds",
        T::Int,
        "300",
        "Seconds from now written as the expiry (exp) claim of the JWT assertion.",
    )
    .between(0, 86_400)
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.claim.iss",
        T::String,
        "Issuer (iss) claim of the JWT assertion sent to the OAuth token endpoint.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.assertion.claim.jti.include",
        T::Boolean,
        "false",
        "Whether the JWT assertion carries a unique id (jti) claim.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.assertion.claim.nbf.seconds",
        T::Int,
        "60",
        "Seconds before now written as the not-before (nbf) claim of the JWT assertion.",
    )
    .between(0, 3600)
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.claim.sub",
        T::String,
        "Subject (sub) claim of the JWT assertion sent to the OAuth token endpoint.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.file",
        T::String,
        "File holding a ready-made JWT assertion for the OAuth token endpoint.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.private.key.file",
        T::String,
        "File holding the private key that signs the JWT assertion.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.private.key.passphrase",
        T::Password,
        "Passphrase of the private key that signs the JWT assertion.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.assertion.template.file",
        T::String,
        "File with header and claim templates for the JWT assertion.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.client.credentials.client.id",
        T::String,
        "Client id presented in the OAuth client credentials grant.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.client.credentials.client.secret",
        T::Password,
        "Client secret presented in the OAuth client credentials grant.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.clock.skew.seconds",
        T::Int,
        "30",
        "Clock difference, in seconds, tolerated when checking an OAuth token's times.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.expected.audience",
        T::List,
        "Audiences of which an OAuth token must name one to be accepted.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.oauthbearer.expected.issuer", T::String, "Issuer an OAuth token must name to be accepted.")
        .read_only()
        .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        T::Long,
        "3600000",
        "How often the JWKS keys that verify OAuth tokens are fetched again.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        T::Long,
        "10000",
        "Longest pause between retries of a failed JWKS fetch.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        T::Long,
        "100",
        "First pause before a failed JWKS fetch is retried.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.oauthbearer.jwks.endpoint.url", T::String, "URL or file of the JWKS keys that verify OAuth tokens.")
        .read_only()
        .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.jwt.retriever.class",
        T::Class,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
        "Plug-in that obtains the JWT an OAuth login presents.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.jwt.validator.class",
        T::Class,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
        "Plug-in that checks the JWT an OAuth client presents.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.oauthbearer.scope", T::String, "Scope requested from the OAuth token endpoint.")
        .read_only()
        .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.scope.claim.name",
        T::String,
        "scope",
        "Name of the OAuth token claim that holds the granted scopes.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def(
        "sasl.oauthbearer.sub.claim.name",
        T::String,
        "sub",
        "Name of the OAuth token claim that holds the subject (the principal).",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null(
        "sasl.oauthbearer.token.endpoint.url",
        T::String,
        "URL or file from which an OAuth login obtains its token.",
    )
    .read_only()
    .not_applicable(PLAIN_SCRAM_ONLY),
    def_null("sasl.server.callback.handler.class", T::Class, "Callback handler plug-in for the broker's SASL server.")
        .read_only()
        .not_applicable(NO_PLUGINS),
    def(
        "sasl.server.max.receive.size",
        T::Int,
        "524288",
        "Largest frame a client may send before it has authenticated.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def("security.inter.broker.protocol", T::String, "PLAINTEXT", "Security protocol brokers use with each other.")
        .one_of(SECURITY_PROTOCOLS)
        .read_only()
        .not_applicable(NO_REPLICAS),
    def_null("security.providers", T::String, "JVM security provider classes the broker registers at startup.")
        .read_only()
        .not_applicable(NO_JVM),
    def(
        "share.coordinator.append.linger.ms",
        T::Int,
        "5",
        "How long the share coordinator gathers writes before appending them.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.load.buffer.size",
        T::Int,
        "5242880",
        "Read buffer for loading the share-group state topic into memory.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.snapshot.update.records.per.snapshot",
        T::Int,
        "500",
        "Updates to a share partition's state between two full snapshots of it.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.state.topic.compression.codec",
        T::Int,
        "0",
        "Compression codec of the share-group state topic.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def("share.coordinator.state.topic.min.isr", T::Short, "2", "min.insync.replicas of the share-group state topic.")
        .read_only()
        .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.state.topic.num.partitions",
        T::Int,
        "50",
        "Partition count of the share-group state topic.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.state.topic.replication.factor",
        T::Short,
        "3",
        "Replication factor of the share-group state topic.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.state.topic.segment.bytes",
        T::Int,
        "104857600",
        "Log file size of the share-group state topic.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def("share.coordinator.threads", T::Int, "1", "Threads that run the share coordinator's work.")
        .read_only()
        .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.coordinator.write.timeout.ms",
        T::Int,
        "5000",
        "How long a share state write waits for the state topic's replicas.",
    )
    .read_only()
    .not_applicable(SHARE_STATE_IN_METADATA),
    def(
        "share.fetch.purgatory.purge.interval.requests",
        T::Int,
        "1000",
        "How often Kafka sweeps completed ShareFetch waits.",
    )
    .read_only()
    .not_applicable(NO_PURGATORY),
    def(
        "socket.connection.setup.timeout.max.ms",
        T::Long,
        "30000",
        "Upper bound of the growing timeout for opening outgoing connections.",
    )
    .read_only()
    .not_applicable(NO_BROKER_CONNECTIONS),
    def(
        "socket.connection.setup.timeout.ms",
        T::Long,
        "10000",
        "First timeout for opening an outgoing connection; it grows after failures.",
    )
    .read_only()
    .not_applicable(NO_BROKER_CONNECTIONS),
    def("socket.listen.backlog.size", T::Int, "50", "Pending connections the listening socket queues.")
        .at_least(1)
        .read_only()
        .not_applicable(LISTEN_BACKLOG_FLAG),
    def("socket.receive.buffer.bytes", T::Int, "102400", "Receive buffer of client sockets; -1 uses the OS default.")
        .read_only()
        .not_applicable(AGENT_FLAGS),
    def("socket.request.max.bytes", T::Int, "104857600", "Largest request frame the broker reads.")
        .at_least(1)
        .read_only(),
    def("socket.send.buffer.bytes", T::Int, "102400", "Send buffer of client sockets; -1 uses the OS default.")
        .read_only()
        .not_applicable(AGENT_FLAGS),
    def(
        "ssl.allow.dn.changes",
        T::Boolean,
        "false",
        "Whether a reloaded key store may change the certificate's distinguished name.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def(
        "ssl.allow.san.changes",
        T::Boolean,
        "false",
        "Whether a reloaded key store may change the certificate's alternative names.",
    )
    .read_only()
    .not_applicable(AGENT_FLAGS),
    def("ssl.cipher.suites", T::List, "", "TLS cipher suites allowed; empty allows the JVM's defaults.")
        .not_applicable(AGENT_FLAGS),
    def("ssl.client.auth", T::String, "none", "Whether clients must present a TLS certificate.")
        .one_of(&["required", "requested", "none"])
        .not_applicable(AGENT_FLAGS),
    def("ssl.enabled.protocols", T::List, "TLSv1.2,TLSv1.3", "TLS versions the broker accepts.")
        .not_applicable(AGENT_FLAGS),
    def("ssl.endpoint.identification.algorithm", T::String, "https", "Host name check applied to peer certificates.")
        .not_applicable(AGENT_FLAGS),
    def_null("ssl.engine.factory.class", T::Class, "Plug-in that builds the broker's TLS engines.")
        .not_applicable(NO_PLUGINS),
    def_null("ssl.key.password", T::Password, "Password of the private key in the key store.")
        .not_applicable(AGENT_FLAGS),
    def("ssl.keymanager.algorithm", T::String, "SunX509", "Algorithm of the JVM key manager factory used for TLS.")
        .not_applicable(NO_JVM),
    def_null("ssl.keystore.certificate.chain", T::Password, "PEM certificate chain of the broker.")
        .not_applicable(AGENT_FLAGS),
    def_null("ssl.keystore.key", T::Password, "PEM private key of the broker.").not_applicable(AGENT_FLAGS),
    def_null("ssl.keystore.location", T::String, "Path of the broker's key store.").not_applicable(AGENT_FLAGS),
    def_null("ssl.keystore.password", T::Password, "Password of the key store.").not_applicable(AGENT_FLAGS),
    def("ssl.keystore.type", T::String, "JKS", "File format of the key store.").not_applicable(AGENT_FLAGS),
    def("ssl.principal.mapping.rules", T::String, "DEFAULT", "Rules that turn a certificate name into a principal.")
        .read_only()
        .not_applicable(AGENT_FLAGS),
    def("ssl.protocol", T::String, "TLSv1.3", "TLS protocol used to build the SSL context.")
        .not_applicable(AGENT_FLAGS),
    def_null("ssl.provider", T::String, "JVM security provider used for TLS connections.").not_applicable(NO_JVM),
    def_null("ssl.secure.random.implementation", T::String, "Random number generator the JVM uses for TLS operations.")
        .not_applicable(NO_JVM),
    def("ssl.trustmanager.algorithm", T::String, "PKIX", "Algorithm of the JVM trust manager factory used for TLS.")
        .not_applicable(NO_JVM),
    def_null("ssl.truststore.certificates", T::Password, "PEM certificates the broker trusts.")
        .not_applicable(AGENT_FLAGS),
    def_null("ssl.truststore.location", T::String, "Path of the trust store.").not_applicable(AGENT_FLAGS),
    def_null("ssl.truststore.password", T::Password, "Password of the trust store.").not_applicable(AGENT_FLAGS),
    def("ssl.truststore.type", T::String, "JKS", "File format of the trust store.").not_applicable(AGENT_FLAGS),
    def("telemetry.max.bytes", T::Int, "1048576", "Largest client metrics payload a PushTelemetry request may carry.")
        .read_only()
        .not_applicable(NO_CLIENT_TELEMETRY),
    def(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        T::Int,
        "10000",
        "How often transactions past their timeout are aborted.",
    )
    .at_least(1)
    .read_only(),
    def("transaction.max.timeout.ms", T::Int, "900000", "Longest transaction timeout a producer may ask for.")
        .at_least(1),
    def(
        "transaction.partition.verification.enable",
        T::Boolean,
        "true",
        "Whether a transactional write is checked against the partitions added to its transaction.",
    )
    .not_applicable("Floe always checks that a transactional write's partition was added to the transaction"),
    def(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        T::Int,
        "3600000",
        "How often expired transactional ids are removed.",
    )
    .at_least(1)
    .read_only(),
    def(
        "transaction.state.log.load.buffer.size",
        T::Int,
        "5242880",
        "Read buffer for loading the transaction state topic.",
    )
    .at_least(1)
    .read_only()
    .not_applicable(NO_INTERNAL_TOPICS),
    def("transaction.state.log.min.isr", T::Int, "2", "min.insync.replicas of the transaction state topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def("transaction.state.log.num.partitions", T::Int, "50", "Partition count of the transaction state topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def(
        "transaction.state.log.replication.factor",
        T::Short,
        "3",
        "Replication factor of the transaction state topic.",
    )
    .at_least(1)
    .read_only()
    .not_applicable(NO_INTERNAL_TOPICS),
    def("transaction.state.log.segment.bytes", T::Int, "104857600", "Log file size of the transaction state topic.")
        .at_least(1)
        .read_only()
        .not_applicable(NO_INTERNAL_TOPICS),
    def(
        "transaction.two.phase.commit.enable",
        T::Boolean,
        "false",
        "Whether producers may run two-phase commit transactions (KIP-939).",
    )
    .read_only()
    .not_applicable("Floe does not implement two-phase commit transactions (KIP-939)"),
    def(
        "transactional.id.expiration.ms",
        T::Int,
        "604800000",
        "Idle time after which a transactional id is forgotten.",
    )
    .at_least(1),
    def("unclean.leader.election.enable", T::Boolean, "false", "Cluster default for unclean.leader.election.enable.")
        .not_applicable(NO_LEADERS),
];

/// Kafka's group configs (the GROUP config resource, KIP-848 and KIP-932), sorted by name: each
/// falls back to the broker config of its `broker_synonym` and, where it has bounds, must lie
/// within the values of those broker configs when it is set. Kafka 4.3's share.delivery.count.limit
/// and share.partition.max.record.locks are here too.
pub static GROUP_CONFIGS: &[ConfigDef] = &[
    def("consumer.heartbeat.interval.ms", T::Int, "5000", "How often this consumer-protocol group's members heartbeat.")
        .at_least(1)
        .synonym("group.consumer.heartbeat.interval.ms")
        .bounded_by("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    def(
        "consumer.session.timeout.ms",
        T::Int,
        "45000",
        "How long a member of this consumer-protocol group may go without a heartbeat before it is removed.",
    )
    .at_least(1)
    .synonym("group.consumer.session.timeout.ms")
    .bounded_by("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    def(
        "share.auto.offset.reset",
        T::String,
        "latest",
        "Where this share group starts reading a partition it has not read before: earliest, latest, or by_duration: and an ISO-8601 duration back from now.",
    )
    .share_offset_reset()
    .synonym("floe.share.auto.offset.reset"),
    def(
        "share.delivery.count.limit",
        T::Int,
        "5",
        "Times this share group delivers a record before it gives up on it (archives it).",
    )
    .between(2, 10)
    .synonym("group.share.delivery.count.limit"),
    def("share.heartbeat.interval.ms", T::Int, "5000", "How often this share group's members heartbeat.")
        .at_least(1)
        .synonym("group.share.heartbeat.interval.ms")
        .bounded_by("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    def(
        "share.isolation.level",
        T::String,
        "read_uncommitted",
        "Whether this share group delivers records of open and aborted transactions (read_uncommitted) or only committed ones.",
    )
    .one_of(&["read_committed", "read_uncommitted"])
    .synonym("floe.share.isolation.level"),
    def(
        "share.partition.max.record.locks",
        T::Int,
        "2000",
        "Most records of one partition this share group may hold in flight at once.",
    )
    .between(100, 10000)
    .synonym("group.share.partition.max.record.locks")
    .at_most_broker("group.share.partition.max.record.locks"),
    def(
        "share.record.lock.duration.ms",
        T::Int,
        "30000",
        "How long a member of this share group holds a record before it may go to another member.",
    )
    .at_least(1000)
    .synonym("group.share.record.lock.duration.ms")
    .bounded_by("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    def(
        "share.session.timeout.ms",
        T::Int,
        "45000",
        "How long a member of this share group may go without a heartbeat before it is removed.",
    )
    .at_least(1)
    .synonym("group.share.session.timeout.ms")
    .bounded_by("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    def("streams.heartbeat.interval.ms", T::Int, "5000", "How often this streams group's members heartbeat.")
        .at_least(1)
        .synonym("group.streams.heartbeat.interval.ms")
        .not_applicable(NO_STREAMS_GROUPS),
    def("streams.num.standby.replicas", T::Int, "0", "Standby task replicas of this streams group.")
        .at_least(0)
        .synonym("group.streams.num.standby.replicas")
        .not_applicable(NO_STREAMS_GROUPS),
    def(
        "streams.session.timeout.ms",
        T::Int,
        "45000",
        "How long a member of this streams group may go without a heartbeat before it is removed.",
    )
    .at_least(1)
    .synonym("group.streams.session.timeout.ms")
    .not_applicable(NO_STREAMS_GROUPS),
];

// Lookups binary-search by name and the normalizers trust that each validator fits its type;
// both rest on these checks, which fail the build rather than a request.
const _: () = assert!(table_is_well_formed(TOPIC_CONFIGS), "TOPIC_CONFIGS must be sorted, unique and well-typed");
const _: () = assert!(table_is_well_formed(BROKER_CONFIGS), "BROKER_CONFIGS must be sorted, unique and well-typed");
const _: () = assert!(table_is_well_formed(GROUP_CONFIGS), "GROUP_CONFIGS must be sorted, unique and well-typed");

const fn table_is_well_formed(table: &[ConfigDef]) -> bool {
    let mut index = 0;
    while index < table.len() {
        let def = &table[index];
        if index > 0 && !name_precedes(table[index - 1].name, def.name) {
            return false;
        }
        if !validator_fits_type(def.validator, def.config_type) {
            return false;
        }
        if def.sensitive != matches!(def.config_type, ConfigType::Password) {
            return false;
        }
        index += 1;
    }
    true
}

/// Strict byte-wise `a < b`, the order `str::cmp` uses.
const fn name_precedes(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut index = 0;
    while index < a.len() && index < b.len() {
        if a[index] != b[index] {
            return a[index] < b[index];
        }
        index += 1;
    }
    a.len() < b.len()
}

const fn validator_fits_type(validator: Validator, config_type: ConfigType) -> bool {
    match validator {
        Validator::Any => true,
        Validator::AtLeast(_) | Validator::Between(..) => {
            matches!(config_type, ConfigType::Short | ConfigType::Int | ConfigType::Long)
        }
        Validator::GzipLevel => matches!(config_type, ConfigType::Int),
        Validator::DoubleBetween(..) => matches!(config_type, ConfigType::Double),
        Validator::OneOf(_) | Validator::TablePartitionBy | Validator::ShareOffsetReset => {
            matches!(config_type, ConfigType::String)
        }
        Validator::ListOf { .. } | Validator::ThrottledReplicas => matches!(config_type, ConfigType::List),
    }
}

#[cfg(test)]
mod tests;
