use super::*;

/// Validates `value` for `name` in whichever table holds it and compares with `expected`:
/// `Ok(normalized)` or `Err(())`. A name in both tables must get the same answer from both; a
/// name in neither must be rejected. Every error must render as one line naming the config.
fn check(name: &str, value: &str, expected: Result<&str, ()>) {
    let from_topic = topic_config(name).map(|_| validate_topic_config(name, value));
    let from_broker = broker_config(name).map(|_| validate_broker_config(name, value));
    let actual = match (from_topic, from_broker) {
        (Some(topic), Some(broker)) => {
            assert_eq!(topic, broker, "topic and broker tables disagree on {name}={value:?}");
            topic
        }
        (Some(result), None) | (None, Some(result)) => result,
        (None, None) => {
            let result = validate_topic_config(name, value);
            assert_eq!(result, validate_broker_config(name, value));
            assert!(matches!(result, Err(ConfigError::UnknownName { .. })), "{name} should be unknown");
            result
        }
    };
    match (&actual, expected) {
        (Ok(normalized), Ok(want)) => assert_eq!(normalized, want, "{name}={value:?}"),
        (Err(error), Err(())) => {
            let message = error.to_string();
            assert!(!message.contains('\n'), "multi-line message: {message}");
            assert!(message.contains(&excerpt(name)), "message does not name the config: {message}");
        }
        _ => panic!("{name}={value:?}: got {actual:?}, want {expected:?}"),
    }
}

#[test]
fn booleans_accept_any_case_and_normalize_to_lowercase() {
    check("preallocate", "true", Ok("true"));
    check("preallocate", " TRUE ", Ok("true"));
    check("auto.create.topics.enable", "False", Ok("false"));
    check("preallocate", "yes", Err(()));
    check("preallocate", "1", Err(()));
    check("preallocate", "", Err(()));
}

#[test]
fn integers_are_trimmed_and_canonical() {
    check("retention.ms", " 86400000 ", Ok("86400000"));
    check("retention.ms", "+007", Ok("7"));
    check("retention.ms", "-1", Ok("-1"));
    check("retention.ms", "9223372036854775807", Ok("9223372036854775807"));
    check("retention.ms", "9223372036854775808", Err(()));
    check("retention.ms", "1.5", Err(()));
    check("retention.ms", "1e3", Err(()));
    check("retention.ms", "1_000", Err(()));
    check("retention.ms", "", Err(()));
    check("retention.ms", "ten", Err(()));
}

#[test]
fn int_and_short_have_their_own_width() {
    check("max.message.bytes", "2147483647", Ok("2147483647"));
    check("max.message.bytes", "2147483648", Err(()));
    check("offsets.topic.replication.factor", "32767", Ok("32767"));
    check("offsets.topic.replication.factor", "32768", Err(()));
    check("offsets.commit.required.acks", "-32768", Ok("-32768"));
}

#[test]
fn doubles_must_be_finite_numbers() {
    check("min.cleanable.dirty.ratio", " 0.25 ", Ok("0.25"));
    check("min.cleanable.dirty.ratio", "1", Ok("1"));
    check("min.cleanable.dirty.ratio", "0", Ok("0"));
    check("log.cleaner.io.max.bytes.per.second", "1e6", Ok("1e6"));
    check("log.cleaner.io.max.bytes.per.second", "NaN", Err(()));
    check("log.cleaner.io.max.bytes.per.second", "inf", Err(()));
    check("log.cleaner.io.max.bytes.per.second", "1e400", Err(()));
    check("min.cleanable.dirty.ratio", "half", Err(()));
}

#[test]
fn ranges_kafka_applies_are_enforced() {
    check("retention.ms", "-2", Err(()));
    check("retention.bytes", "-1", Ok("-1"));
    check("retention.bytes", "-2", Err(()));
    check("max.message.bytes", "0", Ok("0"));
    check("max.message.bytes", "-1", Err(()));
    check("min.cleanable.dirty.ratio", "1.01", Err(()));
    check("min.cleanable.dirty.ratio", "-0.1", Err(()));
    check("min.insync.replicas", "1", Ok("1"));
    check("min.insync.replicas", "0", Err(()));
    check("segment.bytes", "14", Ok("14"));
    check("segment.bytes", "13", Err(()));
    check("segment.ms", "0", Err(()));
    check("max.compaction.lag.ms", "0", Err(()));
    check("delete.retention.ms", "-1", Err(()));
    check("local.retention.ms", "-2", Ok("-2"));
    check("local.retention.ms", "-3", Err(()));
    check("fetch.max.bytes", "1023", Err(()));
    for name in [
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "log.message.timestamp.after.max.ms",
    ] {
        check(name, "0", Ok("0"));
        check(name, "-1", Err(()));
    }
}

#[test]
fn compression_levels_follow_each_codec() {
    check("compression.gzip.level", "-1", Ok("-1"));
    check("compression.gzip.level", "1", Ok("1"));
    check("compression.gzip.level", "9", Ok("9"));
    check("compression.gzip.level", "0", Err(()));
    check("compression.gzip.level", "10", Err(()));
    check("compression.gzip.level", "-2", Err(()));
    check("compression.lz4.level", "1", Ok("1"));
    check("compression.lz4.level", "17", Ok("17"));
    check("compression.lz4.level", "0", Err(()));
    check("compression.lz4.level", "18", Err(()));
    check("compression.zstd.level", "-131072", Ok("-131072"));
    check("compression.zstd.level", "22", Ok("22"));
    check("compression.zstd.level", "-131073", Err(()));
    check("compression.zstd.level", "23", Err(()));
}

#[test]
fn one_of_choices_are_exact() {
    for codec in ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] {
        check("compression.type", codec, Ok(codec));
    }
    check("compression.type", " zstd ", Ok("zstd"));
    check("compression.type", "GZIP", Err(()));
    check("compression.type", "brotli", Err(()));
    check("compression.type", "", Err(()));
    check("message.timestamp.type", "LogAppendTime", Ok("LogAppendTime"));
    check("message.timestamp.type", "logappendtime", Err(()));
    check("security.inter.broker.protocol", "SASL_SSL", Ok("SASL_SSL"));
    check("ssl.client.auth", "optional", Err(()));
}

#[test]
fn cleanup_policy_is_a_nonempty_set_of_known_policies() {
    check("cleanup.policy", "compact", Ok("compact"));
    check("cleanup.policy", " delete , compact ", Ok("delete,compact"));
    check("cleanup.policy", "compact,delete", Ok("compact,delete"));
    check("log.cleanup.policy", "compact", Ok("compact"));
    check("cleanup.policy", "", Err(()));
    check("cleanup.policy", "   ", Err(()));
    check("cleanup.policy", "Delete", Err(()));
    check("cleanup.policy", "delete,delete", Err(()));
    check("cleanup.policy", "delete,,compact", Err(()));
    check("cleanup.policy", "delete,", Err(()));
    check("cleanup.policy", "archive", Err(()));
}

#[test]
fn free_lists_drop_whitespace_around_commas() {
    check("ssl.enabled.protocols", " TLSv1.2 ,TLSv1.3 ", Ok("TLSv1.2,TLSv1.3"));
    check("metric.reporters", "", Ok(""));
    check("metric.reporters", "a.B, c.D", Ok("a.B,c.D"));
    check("metric.reporters", "a.B,,c.D", Err(()));
    check("process.roles", "broker, controller", Ok("broker,controller"));
    check("process.roles", "", Ok(""));
    check("process.roles", "agent", Err(()));
}

#[test]
fn throttled_replicas_are_a_star_or_partition_broker_pairs() {
    check("leader.replication.throttled.replicas", "", Ok(""));
    check("leader.replication.throttled.replicas", " * ", Ok("*"));
    check("follower.replication.throttled.replicas", "0:1, 1:2", Ok("0:1,1:2"));
    check("follower.replication.throttled.replicas", "0:a", Err(()));
    check("follower.replication.throttled.replicas", "0", Err(()));
    check("follower.replication.throttled.replicas", "*,0:1", Err(()));
    check("follower.replication.throttled.replicas", ":1", Err(()));
}

#[test]
fn text_values_are_trimmed_and_otherwise_kept() {
    check("message.format.version", " 2.8 ", Ok("2.8"));
    check("listeners", "PLAINTEXT://0.0.0.0:9092", Ok("PLAINTEXT://0.0.0.0:9092"));
    check("advertised.listeners", "", Ok(""));
    check("replica.selector.class", "org.example.Nearest", Ok("org.example.Nearest"));
    check("sasl.jaas.config", " secret ", Ok("secret"));
}

#[test]
fn unknown_names_are_rejected_per_resource() {
    check("no.such.config", "1", Err(()));
    check("", "1", Err(()));
    check("Retention.ms", "1", Err(()));
    assert!(matches!(validate_topic_config("log.retention.ms", "1"), Err(ConfigError::UnknownName { .. })));
    assert!(matches!(validate_broker_config("retention.ms", "1"), Err(ConfigError::UnknownName { .. })));
    assert!(matches!(validate_broker_config("zookeeper.connect", "zk:2181"), Err(ConfigError::UnknownName { .. })));
}

#[test]
fn oversized_values_are_rejected_and_errors_stay_short() {
    let huge = "x".repeat(CONFIG_VALUE_BYTES_MAX + 1);
    check("listeners", &huge, Err(()));
    check("listeners", &"x".repeat(CONFIG_VALUE_BYTES_MAX), Ok(&"x".repeat(CONFIG_VALUE_BYTES_MAX)));
    let Err(ConfigError::InvalidValue { value, .. }) = validate_broker_config("listeners", &huge) else {
        panic!("oversized value accepted");
    };
    assert!(value.len() < 100, "error copies the whole value");
    check("retention.ms", "12\n34", Err(()));
}

#[test]
fn secrets_never_appear_in_errors() {
    let secret = format!("hunter2{}", "x".repeat(CONFIG_VALUE_BYTES_MAX));
    let error = validate_broker_config("ssl.keystore.password", &secret).expect_err("oversized secret accepted");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[test]
fn every_default_passes_its_own_validator_unchanged() {
    for def in TOPIC_CONFIGS.iter().chain(BROKER_CONFIGS) {
        if let Some(default) = def.default {
            assert_eq!(def.validate(default).as_deref(), Ok(default), "default of {}", def.name);
            check(def.name, default, Ok(default));
        }
    }
}

#[test]
fn tables_are_sorted_and_unique() {
    for table in [TOPIC_CONFIGS, BROKER_CONFIGS] {
        for pair in table.windows(2) {
            assert!(pair[0].name < pair[1].name, "{} must sort before {}", pair[0].name, pair[1].name);
        }
        for def in table {
            assert!(std::ptr::eq(lookup(table, def.name).expect("lookup finds every row"), def));
        }
    }
}

#[test]
fn topic_synonyms_name_matching_broker_configs() {
    let without_broker_default = [
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        // Schema validation (Confluent Server's names, and Floe's mode) is set per topic only.
        "confluent.key.schema.validation",
        "confluent.key.subject.name.strategy",
        "confluent.value.schema.validation",
        "confluent.value.subject.name.strategy",
        "floe.schema.validation.mode",
        // Table topics are set per topic only.
        "floe.table.commit.interval.ms",
        "floe.table.enable",
        "floe.table.partition.by",
        "floe.table.schema.incompatible",
        "floe.table.target.file.bytes",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
    ];
    for def in TOPIC_CONFIGS {
        let Some(synonym) = def.broker_synonym else {
            assert!(without_broker_default.contains(&def.name), "{} lacks a broker synonym", def.name);
            continue;
        };
        let broker = broker_config(synonym).unwrap_or_else(|| panic!("{} names missing {synonym}", def.name));
        assert_eq!(broker.config_type, def.config_type, "{} and {synonym}", def.name);
        // An object holds many topics' records, so only the cluster-wide delete delay applies.
        let cluster_wide_only = def.name == "file.delete.delay.ms";
        assert_eq!(
            broker.applicability == Applicability::Applied && !cluster_wide_only,
            def.applicability == Applicability::Applied,
            "{} and {synonym} disagree on applicability",
            def.name
        );
        // A null broker default means Kafka falls back to another synonym (hours, scheduler).
        assert!(broker.default.is_none() || broker.default == def.default, "{} and {synonym} defaults", def.name);
    }
}

#[test]
fn applicability_matches_what_floe_does() {
    for name in [
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "retention.bytes",
        "retention.ms",
    ] {
        assert_eq!(topic_config(name).map(|def| def.applicability), Some(Applicability::Applied), "{name}");
    }
    for name in [
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    ] {
        let def = topic_config(name).unwrap_or_else(|| panic!("{name} missing"));
        assert!(matches!(def.applicability, Applicability::NotApplicable(_)), "{name}");
    }
    for def in TOPIC_CONFIGS.iter().chain(BROKER_CONFIGS) {
        if let Applicability::NotApplicable(reason) = def.applicability {
            assert!(!reason.is_empty(), "{} gives no reason", def.name);
        }
        assert!(!def.doc.is_empty(), "{} has no doc", def.name);
    }
}

#[test]
fn flags_and_key_defaults_match_kafka() {
    assert!(TOPIC_CONFIGS.iter().all(|def| !def.read_only), "topic configs are always alterable");
    for def in TOPIC_CONFIGS.iter().chain(BROKER_CONFIGS) {
        assert_eq!(def.sensitive, def.config_type == ConfigType::Password, "{}", def.name);
    }
    for (name, default) in [
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "1"),
        ("message.max.bytes", "1048588"),
        ("transaction.max.timeout.ms", "900000"),
        ("offsets.retention.minutes", "10080"),
    ] {
        let def = broker_config(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(def.default, Some(default), "{name}");
        assert_eq!(def.applicability, Applicability::Applied, "{name}");
    }
    assert_eq!(broker_config("log.retention.ms").and_then(|def| def.default), None);
    assert!(broker_config("log.retention.ms").is_some_and(|def| !def.read_only));
    assert!(broker_config("log.retention.hours").is_some_and(|def| def.read_only));
    assert!(TOPIC_CONFIGS.len() >= 36 && BROKER_CONFIGS.len() >= 120);
}

/// One row of a Kafka 4.x config list under `kafka-4.1/`: name, type, default (`\N` for null),
/// update mode.
fn kafka_rows(text: &'static str) -> Vec<[&'static str; 4]> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("name\ttype\tdefault\tmode"), "header");
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            <[&str; 4]>::try_from(fields).unwrap_or_else(|f| panic!("row {line:?} has {} fields, want 4", f.len()))
        })
        .collect()
}

/// Rows of `floe-extras.tsv` or `divergences.tsv` (after the header), split on tabs.
fn notes(text: &'static str) -> Vec<Vec<&'static str>> {
    text.lines().skip(1).map(|line| line.split('\t').collect()).collect()
}

fn kafka_type(config_type: ConfigType) -> &'static str {
    match config_type {
        ConfigType::Boolean => "boolean",
        ConfigType::String => "string",
        ConfigType::Int => "int",
        ConfigType::Short => "short",
        ConfigType::Long => "long",
        ConfigType::Double => "double",
        ConfigType::List => "list",
        ConfigType::Class => "class",
        ConfigType::Password => "password",
    }
}

/// Every topic and broker config of Kafka 4.0 and 4.1 is in the catalog with Kafka's type,
/// default and update mode, except for the differences `divergences.tsv` names and explains;
/// every name the catalog has beyond Kafka's is listed, with its reason, in `floe-extras.tsv`.
#[test]
fn the_catalog_holds_every_kafka_4_config_as_kafka_defines_it() {
    let lists = [
        ("topic", include_str!("kafka-4.1/topic.tsv"), TOPIC_CONFIGS, 33),
        ("broker", include_str!("kafka-4.1/broker.tsv"), BROKER_CONFIGS, 320),
    ];
    let divergences = notes(include_str!("kafka-4.1/divergences.tsv"));
    let extras = notes(include_str!("kafka-4.1/floe-extras.tsv"));
    let diverges = |resource: &str, name: &str, what: &str| {
        divergences.iter().any(|d| d[..3] == [resource, name, what] && d.get(3).is_some_and(|why| !why.is_empty()))
    };
    let mut problems = Vec::new();
    let mut used_divergences = 0;
    for (resource, text, table, count) in lists {
        let rows = kafka_rows(text);
        assert_eq!(rows.len(), count, "{resource} list truncated?");
        for [name, kafka_type_name, default, mode] in &rows {
            let Some(def) = table.iter().find(|d| d.name == *name) else {
                problems.push(format!("{resource} config {name} is missing"));
                continue;
            };
            let kafka_default = (*default != "\\N").then_some(*default);
            let checks = [
                ("type", kafka_type(def.config_type) == *kafka_type_name),
                ("default", def.default == kafka_default),
                ("read_only", def.read_only == (*mode == "ro")),
            ];
            for (what, same) in checks {
                match (same, diverges(resource, name, what)) {
                    (true, false) => {}
                    (false, true) => used_divergences += 1,
                    (false, false) => problems.push(format!("{resource} config {name}: {what} differs from Kafka 4.1")),
                    (true, true) => problems.push(format!("{resource} config {name}: divergence {what} is stale")),
                }
            }
        }
        for def in table {
            let in_kafka = rows.iter().any(|r| r[0] == def.name);
            let extra =
                extras.iter().any(|e| e[..2] == [resource, def.name] && e.get(2).is_some_and(|r| !r.is_empty()));
            if in_kafka == extra {
                problems.push(format!(
                    "{resource} config {}: in Kafka's list {in_kafka}, in floe-extras {extra}",
                    def.name
                ));
            }
            if def.doc.is_empty() || matches!(def.applicability, Applicability::NotApplicable("")) {
                problems.push(format!("{resource} config {} lacks a description or a reason", def.name));
            }
            if def.sensitive != (def.config_type == ConfigType::Password) {
                problems.push(format!("{resource} config {}: sensitive must follow the password type", def.name));
            }
        }
    }
    assert_eq!(used_divergences, divergences.len(), "every divergence names a real difference");
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn table_partitioning_names_a_transform_and_maybe_a_field() {
    for ok in ["none", "hour", "day", "hour:created_at", "day:ts2"] {
        check("floe.table.partition.by", ok, Ok(ok));
    }
    for bad in ["", "month", "hour:", "day:a.b", "none:x", "HOUR", "day:a b"] {
        check("floe.table.partition.by", bad, Err(()));
    }
    assert_eq!(table_partition_by("day:ts"), Some(TablePartitionBy::Day(Some("ts"))));
    assert_eq!(table_partition_by("hour"), Some(TablePartitionBy::Hour(None)));
    check("floe.table.commit.interval.ms", "50", Err(()));
    check("floe.table.target.file.bytes", "1048576", Ok("1048576"));
}

#[test]
fn share_offset_reset_reads_earliest_latest_and_iso_durations() {
    use ShareOffsetReset::{ByDuration, Earliest, Latest};
    let cases = [
        ("earliest", Some(Earliest)),
        ("latest", Some(Latest)),
        ("by_duration:PT15M", Some(ByDuration(900_000))),
        ("by_duration:P1DT2H", Some(ByDuration(93_600_000))),
        ("by_duration:pt0.5s", Some(ByDuration(500))),
        ("by_duration:P2D", Some(ByDuration(172_800_000))),
        ("by_duration:PT1H30M20.125S", Some(ByDuration(5_420_125))),
        ("by_duration:PT0S", Some(ByDuration(0))),
        ("by_duration:", None),
        ("by_duration:P", None),
        ("by_duration:PT", None),
        ("by_duration:PT-5M", None),
        ("by_duration:-PT5M", None),
        ("by_duration:PT5M1H", None),
        ("by_duration:P1H", None),
        ("by_duration:PT1.S", Some(ByDuration(1_000))),
        ("by_duration:PT.5S", None),
        ("by_duration:P106751991167301D", None),
        ("Earliest", None),
        ("none", None),
    ];
    for (value, want) in cases {
        assert_eq!(share_offset_reset(value), want, "{value}");
        let checked = validate_group_config("share.auto.offset.reset", value);
        assert_eq!(checked.is_ok(), want.is_some(), "{value}: {checked:?}");
    }
    assert!(validate_broker_config("floe.share.auto.offset.reset", "by_duration:PT1H").is_ok());
}

/// Every group config falls back to a broker config of its type and default, and names as
/// bounds two dynamic broker configs whose defaults hold its default.
#[test]
fn group_configs_fall_back_to_broker_configs_within_their_bounds() {
    for def in GROUP_CONFIGS {
        let broker = def.broker_synonym.and_then(broker_config);
        let broker = broker.unwrap_or_else(|| panic!("{} has no broker fallback", def.name));
        assert_eq!((broker.config_type, broker.default), (def.config_type, def.default), "{}", def.name);
        let bound = |name: &str| {
            let b = broker_config(name).unwrap_or_else(|| panic!("{name} is not a broker config"));
            assert!(!b.read_only && b.applicability == Applicability::Applied, "{name} must apply");
            b.default.and_then(|d| d.parse::<i64>().ok()).unwrap_or_else(|| panic!("{name} default"))
        };
        let value: i64 = def.default.and_then(|d| d.parse().ok()).unwrap_or_default();
        assert!(def.min_bound.is_none_or(|min| bound(min) <= value), "{} default under its bound", def.name);
        assert!(def.max_bound.is_none_or(|max| value <= bound(max)), "{} default over its bound", def.name);
    }
    assert!(validate_group_config("share.record.lock.duration.ms", "999").is_err());
    assert!(validate_group_config("share.isolation.level", "read_committed").is_ok());
    assert!(matches!(validate_group_config("retention.ms", "1"), Err(ConfigError::UnknownName { .. })));
}
