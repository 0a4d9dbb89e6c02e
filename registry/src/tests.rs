//! Avro resolution cases: whether a reader schema reads what a writer schema wrote, with the
//! verdicts the Avro specification's "Schema Resolution" section gives (and Confluent's
//! registry, which applies those rules, reports).

use crate::avro::AvroSchema;
use crate::{DifferenceKind, ParsedSchema, Rule, check_compatibility};

fn parse(text: &str) -> AvroSchema {
    AvroSchema::parse(text, &[]).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn record(fields: &str) -> String {
    format!(r#"{{"type":"record","name":"R","namespace":"n","fields":[{fields}]}}"#)
}

/// (case, writer, reader, the reader reads the writer's data)
fn cases() -> Vec<(&'static str, String, String, bool)> {
    let s = |t: &str| t.to_owned();
    let mut cases = vec![
        // Primitives and promotions.
        ("same int", s(r#""int""#), s(r#""int""#), true),
        ("int to long", s(r#""int""#), s(r#""long""#), true),
        ("int to float", s(r#""int""#), s(r#""float""#), true),
        ("int to double", s(r#""int""#), s(r#""double""#), true),
        ("long to float", s(r#""long""#), s(r#""float""#), true),
        ("long to double", s(r#""long""#), s(r#""double""#), true),
        ("float to double", s(r#""float""#), s(r#""double""#), true),
        ("string to bytes", s(r#""string""#), s(r#""bytes""#), true),
        ("bytes to string", s(r#""bytes""#), s(r#""string""#), true),
        ("long to int", s(r#""long""#), s(r#""int""#), false),
        ("double to float", s(r#""double""#), s(r#""float""#), false),
        ("float to long", s(r#""float""#), s(r#""long""#), false),
        ("int to string", s(r#""int""#), s(r#""string""#), false),
        ("boolean to int", s(r#""boolean""#), s(r#""int""#), false),
        ("null to null", s(r#""null""#), s(r#""null""#), true),
        ("null to string", s(r#""null""#), s(r#""string""#), false),
        ("string to record", s(r#""string""#), record(""), false),
        // Logical types resolve as their underlying types.
        ("date to int", s(r#"{"type":"int","logicalType":"date"}"#), s(r#""int""#), true),
        ("timestamp-millis to long", s(r#"{"type":"long","logicalType":"timestamp-millis"}"#), s(r#""long""#), true),
        ("int to date", s(r#""int""#), s(r#"{"type":"int","logicalType":"date"}"#), true),
        ("uuid to string", s(r#"{"type":"string","logicalType":"uuid"}"#), s(r#""string""#), true),
        (
            "decimal bytes to bytes",
            s(r#"{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}"#),
            s(r#""bytes""#),
            true,
        ),
        ("long to date", s(r#""long""#), s(r#"{"type":"int","logicalType":"date"}"#), false),
        // Arrays and maps resolve their items and values.
        (
            "array int to array long",
            s(r#"{"type":"array","items":"int"}"#),
            s(r#"{"type":"array","items":"long"}"#),
            true,
        ),
        (
            "array long to array int",
            s(r#"{"type":"array","items":"long"}"#),
            s(r#"{"type":"array","items":"int"}"#),
            false,
        ),
        (
            "map int to map double",
            s(r#"{"type":"map","values":"int"}"#),
            s(r#"{"type":"map","values":"double"}"#),
            true,
        ),
        (
            "map string to map int",
            s(r#"{"type":"map","values":"string"}"#),
            s(r#"{"type":"map","values":"int"}"#),
            false,
        ),
        ("array to map", s(r#"{"type":"array","items":"int"}"#), s(r#"{"type":"map","values":"int"}"#), false),
        // Records: fields by name, defaults, aliases.
        ("same record", record(r#"{"name":"a","type":"int"}"#), record(r#"{"name":"a","type":"int"}"#), true),
        (
            "field added with default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}"#),
            true,
        ),
        (
            "field added without default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#),
            false,
        ),
        (
            "field removed",
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#),
            record(r#"{"name":"a","type":"int"}"#),
            true,
        ),
        ("field promoted", record(r#"{"name":"a","type":"int"}"#), record(r#"{"name":"a","type":"long"}"#), true),
        ("field narrowed", record(r#"{"name":"a","type":"long"}"#), record(r#"{"name":"a","type":"int"}"#), false),
        (
            "field renamed without alias",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"b","type":"int"}"#),
            false,
        ),
        (
            "field renamed with alias",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"b","aliases":["a"],"type":"int"}"#),
            true,
        ),
        (
            "field renamed with default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"b","type":"int","default":0}"#),
            true,
        ),
        (
            "fields reordered",
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#),
            record(r#"{"name":"b","type":"string"},{"name":"a","type":"int"}"#),
            true,
        ),
        (
            "null default for optional field",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"int"},{"name":"o","type":["null","string"],"default":null}"#),
            true,
        ),
        (
            "record renamed",
            s(r#"{"type":"record","name":"A","fields":[]}"#),
            s(r#"{"type":"record","name":"B","fields":[]}"#),
            false,
        ),
        (
            "record renamed with alias",
            s(r#"{"type":"record","name":"A","fields":[]}"#),
            s(r#"{"type":"record","name":"B","aliases":["A"],"fields":[]}"#),
            true,
        ),
        (
            "record namespace changed",
            s(r#"{"type":"record","name":"A","namespace":"x","fields":[]}"#),
            s(r#"{"type":"record","name":"A","namespace":"y","fields":[]}"#),
            false,
        ),
        (
            "record namespace spelled in the name",
            s(r#"{"type":"record","name":"A","namespace":"x","fields":[]}"#),
            s(r#"{"type":"record","name":"x.A","fields":[]}"#),
            true,
        ),
        (
            "nested record field added without default",
            record(r#"{"name":"in","type":{"type":"record","name":"I","fields":[]}}"#),
            record(r#"{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"z","type":"int"}]}}"#),
            false,
        ),
        (
            "nested record field added with default",
            record(r#"{"name":"in","type":{"type":"record","name":"I","fields":[]}}"#),
            record(
                r#"{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"z","type":"int","default":1}]}}"#,
            ),
            true,
        ),
        (
            "recursive record",
            s(r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#),
            s(
                r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]},{"name":"v","type":"int","default":0}]}"#,
            ),
            true,
        ),
        // Enums: symbols, defaults, names.
        (
            "enum same",
            s(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#),
            s(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#),
            true,
        ),
        (
            "enum symbol added in reader",
            s(r#"{"type":"enum","name":"E","symbols":["A"]}"#),
            s(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#),
            true,
        ),
        (
            "enum symbol removed in reader",
            s(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#),
            s(r#"{"type":"enum","name":"E","symbols":["A"]}"#),
            false,
        ),
        (
            "enum symbol removed, reader default",
            s(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#),
            s(r#"{"type":"enum","name":"E","symbols":["A"],"default":"A"}"#),
            true,
        ),
        (
            "enum renamed",
            s(r#"{"type":"enum","name":"E","symbols":["A"]}"#),
            s(r#"{"type":"enum","name":"F","symbols":["A"]}"#),
            false,
        ),
        (
            "enum renamed with alias",
            s(r#"{"type":"enum","name":"E","symbols":["A"]}"#),
            s(r#"{"type":"enum","name":"F","aliases":["E"],"symbols":["A"]}"#),
            true,
        ),
        ("enum to string", s(r#"{"type":"enum","name":"E","symbols":["A"]}"#), s(r#""string""#), false),
        // Fixed: name and size.
        (
            "fixed same",
            s(r#"{"type":"fixed","name":"F","size":4}"#),
            s(r#"{"type":"fixed","name":"F","size":4}"#),
            true,
        ),
        (
            "fixed resized",
            s(r#"{"type":"fixed","name":"F","size":4}"#),
            s(r#"{"type":"fixed","name":"F","size":8}"#),
            false,
        ),
        (
            "fixed renamed",
            s(r#"{"type":"fixed","name":"F","size":4}"#),
            s(r#"{"type":"fixed","name":"G","size":4}"#),
            false,
        ),
        ("fixed to bytes", s(r#"{"type":"fixed","name":"F","size":4}"#), s(r#""bytes""#), false),
        // Unions.
        ("int to union with int", s(r#""int""#), s(r#"["null","int"]"#), true),
        ("int to union with long", s(r#""int""#), s(r#"["null","long"]"#), true),
        ("int to union without it", s(r#""int""#), s(r#"["null","string"]"#), false),
        ("union to its branch type", s(r#"["null","int"]"#), s(r#""int""#), false),
        ("union of one to that type", s(r#"["int"]"#), s(r#""int""#), true),
        ("union branch added", s(r#"["null","int"]"#), s(r#"["null","int","string"]"#), true),
        ("union branch removed", s(r#"["null","int","string"]"#), s(r#"["null","int"]"#), false),
        ("union branches reordered", s(r#"["null","int"]"#), s(r#"["int","null"]"#), true),
        ("union branch promoted", s(r#"["null","int"]"#), s(r#"["null","long"]"#), true),
        (
            "union of records by name",
            s(r#"[{"type":"record","name":"A","fields":[]},{"type":"record","name":"B","fields":[]}]"#),
            s(r#"[{"type":"record","name":"B","fields":[]},{"type":"record","name":"A","fields":[]}]"#),
            true,
        ),
    ];
    cases.sort_by_key(|c| c.0);
    cases
}

#[test]
fn avro_resolution_cases_match_the_specification() {
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for (name, writer, reader, expected) in &cases {
        let differences = parse(reader).can_read(&parse(writer));
        if differences.is_empty() != *expected {
            wrong.push(format!("{name}: expected {expected}, differences {differences:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases wrong:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

#[test]
fn differences_say_what_and_where() {
    let old = parse(&record(r#"{"name":"a","type":"int"}"#));
    let new = parse(&record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#));
    let found = new.can_read(&old);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, DifferenceKind::ReaderFieldMissingDefaultValue.name());
    assert_eq!(found[0].path, "/fields/1");
    let narrowed = parse(&record(r#"{"name":"a","type":"string"}"#));
    let found = narrowed.can_read(&old);
    assert_eq!((found[0].kind, found[0].path.as_str()), (DifferenceKind::TypeMismatch.name(), "/fields/0/type"));
}

#[test]
fn levels_check_the_right_direction_and_versions() {
    let v1 = ParsedSchema::Avro(parse(&record(r#"{"name":"a","type":"int"}"#)));
    let v2 = ParsedSchema::Avro(parse(&record(r#"{"name":"a","type":"int"},{"name":"b","type":"int","default":0}"#)));
    // v3 drops b's default: it reads v2's data (b is there) but not v1's.
    let v3 = ParsedSchema::Avro(parse(&record(r#"{"name":"a","type":"int"},{"name":"b","type":"int"}"#)));
    let earlier = [(2, &v2), (1, &v1)];
    let backward = Rule { backward: true, ..Rule::default() };
    assert!(check_compatibility(&v3, &earlier, backward).is_empty(), "BACKWARD checks the latest only");
    let transitive = Rule { transitive: true, ..backward };
    let messages = check_compatibility(&v3, &earlier, transitive);
    assert!(messages[0].contains("READER_FIELD_MISSING_DEFAULT_VALUE"), "{messages:?}");
    assert!(messages.iter().any(|m| m == "{oldSchemaVersion: 1}"), "{messages:?}");
    // Removing a field without default is forward-incompatible: old readers need it.
    let v4 = ParsedSchema::Avro(parse(&record(r#"{"name":"b","type":"int","default":0}"#)));
    let forward = Rule { forward: true, ..Rule::default() };
    assert!(!check_compatibility(&v4, &[(3, &v3)], forward).is_empty());
    assert!(check_compatibility(&v4, &[(3, &v3)], backward).is_empty());
    assert!(check_compatibility(&v4, &[(3, &v3)], Rule::default()).is_empty(), "NONE");
}

#[test]
fn equal_schemas_written_differently_have_one_canonical_text() {
    let a = parse(r#"{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"int"}]}"#);
    let b = parse(
        "{ \"namespace\": \"n\", \"fields\": [ {\"type\": \"int\", \"name\": \"a\"} ],\n \"name\": \"R\", \"type\": \"record\" }",
    );
    assert_eq!(a.canonical(), b.canonical());
    let c = parse(r#"{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"long"}]}"#);
    assert_ne!(a.canonical(), c.canonical());
    assert_eq!(a.full_name().as_deref(), Some("n.R"));
    // The canonical text parses to the same canonical text.
    assert_eq!(parse(a.canonical()).canonical(), a.canonical());
}

#[test]
fn references_supply_named_types() {
    let common = r#"{"type":"fixed","name":"Id","namespace":"c","size":16}"#;
    let text = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"c.Id"}]}"#;
    assert!(AvroSchema::parse(text, &[]).is_err(), "an unknown name is refused");
    let with = AvroSchema::parse(text, &[common]).expect("parses with its reference");
    assert!(with.can_read(&with).is_empty());
    for bad in [
        "",
        "{",
        r#"{"type":"nope"}"#,
        r#"{"type":"record","name":"R"}"#,
        r#"{"type":"enum","name":"E","symbols":["A","A"]}"#,
    ] {
        assert!(AvroSchema::parse(bad, &[]).is_err(), "{bad:?} is refused");
    }
}

#[test]
fn fixed_uuids_are_refused_rather_than_stored_as_strings() {
    let uuid = r#"{"type":"record","name":"R","fields":[{"name":"id","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}}]}"#;
    assert!(AvroSchema::parse(uuid, &[]).is_err());
    assert!(AvroSchema::parse(r#"{"type":"string","logicalType":"uuid"}"#, &[]).is_ok());
    let duration = r#"{"type":"fixed","name":"D","size":12,"logicalType":"duration"}"#;
    assert!(AvroSchema::parse(duration, &[]).is_ok());
    assert!(AvroSchema::parse(&duration.replace("12", "8"), &[]).is_err());
}

#[test]
fn names_the_avro_parser_would_panic_on_are_refused() {
    // Found by the registry_body fuzz target: apache-avro 0.21 unwraps an alias it builds.
    let bad = [
        r#"{"type":"record","name":"R","aliases":["A: "],"fields":[]}"#,
        r#"{"type":"record","name":"R","namespace":"1ns","aliases":["A"],"fields":[]}"#,
        r#"{"type":"enum","name":"E","aliases":["a b"],"symbols":["X"]}"#,
        r#"{"type":"fixed","name":"F","aliases":["."],"size":2}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"f","type":{"type":"record","name":"bad name","fields":[]}}]}"#,
    ];
    for text in bad {
        let refused = AvroSchema::parse(text, &[]).err().map(|e| e.to_string());
        assert!(refused.as_deref().is_some_and(|e| e.starts_with("Invalid schema")), "{text}: {refused:?}");
    }
    for good in [
        r#"{"type":"record","name":"R","namespace":"a.b_2","aliases":["_X","c.D"],"fields":[]}"#,
        r#"{"type":"record","name":"R","namespace":"","aliases":["A"],"fields":[]}"#,
        // A default shaped like a named type is a value, not a schema.
        r#"{"type":"record","name":"R","fields":[{"name":"f","default":{"type":"record","name":"a b"},
            "type":{"type":"record","name":"S","fields":[{"name":"type","type":"string"},{"name":"name","type":"string"}]}}]}"#,
    ] {
        assert!(AvroSchema::parse(good, &[]).is_ok(), "{good}");
    }
}

#[test]
fn normalizing_an_avro_schema_sorts_its_aliases() {
    let a = r#"{"type":"record","name":"R","aliases":["b","a"],"fields":[{"name":"f","type":"int","aliases":["y","x","y"]}]}"#;
    let b =
        r#"{"type":"record","name":"R","aliases":["a","b"],"fields":[{"name":"f","type":"int","aliases":["x","y"]}]}"#;
    let canonical = |text: &str| {
        let normalized =
            crate::ParsedSchema::normalized_text(crate::SchemaFormat::Avro, text, &[]).expect("normalizes");
        crate::ParsedSchema::parse(crate::SchemaFormat::Avro, &normalized, &[]).expect("parses").canonical().to_owned()
    };
    assert_eq!(canonical(a), canonical(b));
    assert_ne!(parse(a).canonical(), parse(b).canonical(), "without normalizing the order counts");
}

/// Records `T0` to `T{depth}`: each but the last has two fields `["null", T{i+1}]` (the second
/// by name), the last one field `x` of type `leaf`; with `cycle`, each but the last also has a
/// field `["null", "T0"]`. The text grows linearly with `depth`, the paths to `T{depth}` as
/// `2^depth`.
fn shared_unions(depth: usize, leaf: &str, cycle: bool) -> String {
    let mut schema = format!(r#"{{"type":"record","name":"T{depth}","fields":[{{"name":"x","type":"{leaf}"}}]}}"#);
    let up = if cycle { r#",{"name":"up","type":["null","T0"]}"# } else { "" };
    for i in (0..depth).rev() {
        let next = i + 1;
        schema = format!(
            r#"{{"type":"record","name":"T{i}","fields":[{{"name":"a","type":["null",{schema}]}},{{"name":"b","type":["null","T{next}"]}}{up}]}}"#
        );
    }
    schema
}

#[test]
fn records_shared_through_unions_are_compared_once() {
    // Union trials used to forget what they had compared, so each level doubled the work (a
    // second at depth 16, about 17 at 19). Now doubling the depth at most quadruples the steps
    // (linear without the cycle; with it, a pair's verdict waits on T0 and is carried up once per
    // level), where it multiplied them by 4096.
    let steps = |depth: usize, leaf: &str, cycle: bool| {
        let writer = parse(&shared_unions(depth, "int", cycle));
        let reader = parse(&shared_unions(depth, leaf, cycle));
        let (found, steps) = reader.can_read_within(&writer, crate::avro::COMPARE_STEPS_MAX);
        let kinds: Vec<&str> = found.iter().map(|d| d.kind).collect();
        if leaf == "long" {
            assert!(found.is_empty(), "depth {depth}, cycle {cycle}: {found:?}");
        } else {
            // Not readable at the bottom, so neither is any T1 the writer's top record holds.
            assert!(!kinds.is_empty(), "depth {depth}, cycle {cycle}");
            assert!(kinds.iter().all(|k| *k == DifferenceKind::MissingUnionBranch.name()), "{found:?}");
        }
        steps
    };
    for cycle in [false, true] {
        for leaf in ["long", "boolean"] {
            let (shallow, deep) = (steps(12, leaf, cycle), steps(24, leaf, cycle));
            assert!(deep < 4 * shallow && deep < 5_000, "{leaf}, cycle {cycle}: {shallow} steps at 12, {deep} at 24");
        }
    }
}

#[test]
fn a_deep_shared_union_schema_is_checked_in_time() {
    // Before union trials kept their verdicts depth 19 took 17 s and each level doubled it, so
    // depth 25 took over half an hour: checked on a thread, so that fails here instead of
    // holding up the run.
    let (answer, answered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let writer = ParsedSchema::Avro(parse(&shared_unions(25, "int", false)));
        let reader = ParsedSchema::Avro(parse(&shared_unions(25, "boolean", false)));
        let full = Rule { backward: true, forward: true, transitive: false };
        let _ = answer.send(check_compatibility(&reader, &[(1, &writer)], full));
    });
    let messages = answered.recv_timeout(std::time::Duration::from_secs(20)).expect("checked within 20 s");
    assert!(messages[0].contains("MISSING_UNION_BRANCH"), "{messages:?}");
}

#[test]
fn a_check_past_its_budget_is_too_complex_rather_than_partial() {
    let writer = parse(&shared_unions(8, "int", true));
    let reader = parse(&shared_unions(8, "boolean", true));
    let (found, steps) = reader.can_read_within(&writer, 20);
    assert_eq!(steps, 20);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].kind, found[0].path.as_str()), ("SCHEMA_TOO_COMPLEX", "/"));
    assert!(found[0].description.contains("more than 20 steps"), "{found:?}");
}

/// How many cases each property of the cost fuzzer runs: a few by default, so `cargo test`
/// stays quick; `FLOE_FUZZ_CASES` (set by `scripts/fuzz.sh`) runs them long.
pub(crate) fn fuzz_config() -> proptest::test_runner::Config {
    let cases = std::env::var("FLOE_FUZZ_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(16);
    proptest::test_runner::Config::with_cases(cases)
}

/// The cost fuzzer's Avro properties: issue 52's shared types, generated.
mod cost {
    use proptest::prelude::*;

    use super::parse;
    use crate::avro::COMPARE_STEPS_MAX;
    use crate::{Difference, DifferenceKind};

    /// Records `T0` to `T{depth}`: each but the last has `fanout` fields `["null", T{i+1}]` (the
    /// first defines it, the others name it), with `cycle` one more field back to `T0`; the last
    /// has one field of type `leaf`. The text grows linearly with the depth, the paths to the
    /// last record as `fanout^depth`.
    fn shared_records(depth: usize, fanout: usize, leaf: &str, cycle: bool) -> String {
        let mut schema = format!(r#"{{"type":"record","name":"T{depth}","fields":[{{"name":"x","type":"{leaf}"}}]}}"#);
        let up = if cycle { r#",{"name":"up","type":["null","T0"]}"# } else { "" };
        for i in (0..depth).rev() {
            let next = i + 1;
            let named: String =
                (1..fanout).map(|f| format!(r#",{{"name":"f{f}","type":["null","T{next}"]}}"#)).collect();
            schema = format!(
                r#"{{"type":"record","name":"T{i}","fields":[{{"name":"f0","type":["null",{schema}]}}{named}{up}]}}"#
            );
        }
        schema
    }

    fn too_complex(found: &[Difference]) -> bool {
        found.iter().any(|d| d.kind == DifferenceKind::SchemaTooComplex.name())
    }

    proptest! {
        #![proptest_config(super::fuzz_config())]

        /// A compatibility check takes steps in proportion to the schemas' text (each record
        /// pair compared about once), never near its budget; a budget too small for it gives
        /// SCHEMA_TOO_COMPLEX alone, after exactly that many steps.
        #[test]
        fn avro_compatibility_steps_are_linear_in_the_text(
            depth in 1usize..=30,
            fanout in 1usize..=3,
            cycle in any::<bool>(),
            leaf in proptest::sample::select(vec!["int", "long", "boolean"]),
        ) {
            let writer_text = shared_records(depth, fanout, "int", cycle);
            let reader_text = shared_records(depth, fanout, leaf, cycle);
            let (writer, reader) = (parse(&writer_text), parse(&reader_text));
            let bytes = writer_text.len() + reader_text.len();
            let (found, steps) = reader.can_read_within(&writer, COMPARE_STEPS_MAX);
            prop_assert!(!too_complex(&found), "{found:?}");
            prop_assert!(steps <= 64 * bytes, "{steps} steps for {bytes} bytes");
            prop_assert_eq!(found.is_empty(), leaf != "boolean", "{:?}", found);
            let small = steps / 2;
            if small > 0 {
                let (cut, taken) = reader.can_read_within(&writer, small);
                prop_assert_eq!(taken, small);
                prop_assert!(cut.len() == 1 && too_complex(&cut), "{cut:?}");
            }
        }
    }
}
