//! Protobuf: compiling text and descriptors, the canonical text, payloads with message
//! indexes, and compatibility with Confluent's difference names.

use base64::Engine;
use prost::Message;
use prost_reflect::{DynamicMessage, Value};

use super::{BASE64, ProtobufSchema};

const ORDERS: &str = r#"
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";

message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int64> counters = 3;
  google.protobuf.Timestamp at = 4;
  oneof payment { string card = 5; string iban = 6; }
  optional Status status = 7;
  message Line { string sku = 1; int32 quantity = 2; }
  reserved 9, 12 to 15;
  reserved "old";
}
enum Status { UNKNOWN = 0; PAID = 1; }
message Refund { string order_id = 1; }
"#;

fn parse(text: &str) -> ProtobufSchema {
    ProtobufSchema::parse(text, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn text_and_descriptor_registrations_of_one_file_have_one_canonical_text() {
    let text = parse(ORDERS);
    assert!(text.canonical().starts_with("syntax = \"proto3\";"), "{}", text.canonical());
    let respaced = parse(&ORDERS.replace("  ", "    ").replace('\n', "\n\n"));
    assert_eq!(respaced.canonical(), text.canonical());
    // What confluent-kafka's Python serializer registers: the descriptor, base64.
    let serialized = text.serialized();
    let descriptor = ProtobufSchema::parse(&serialized, &[]).unwrap();
    assert_eq!(descriptor.canonical(), text.canonical());
    // The canonical text compiles to the same schema again.
    assert_eq!(parse(text.canonical()).canonical(), text.canonical());
}

#[test]
fn references_are_imports_by_name() {
    let common = "syntax = \"proto3\"; package c; message Money { int64 cents = 1; }";
    let main = "syntax = \"proto3\"; import \"common.proto\"; message Price { c.Money amount = 1; }";
    let s = ProtobufSchema::parse(main, &[("common.proto", common)]).unwrap();
    assert!(s.canonical().contains("import \"common.proto\";"), "{}", s.canonical());
    assert!(ProtobufSchema::parse(main, &[]).is_err(), "an unknown import");
    assert!(ProtobufSchema::parse("message {", &[]).is_err());
    assert!(ProtobufSchema::parse("bm90IGEgZGVzY3JpcHRvcg==", &[]).is_err(), "base64 of no descriptor");
}

#[test]
fn payloads_carry_message_indexes() {
    let s = parse(ORDERS);
    let pool = s.pool.clone();
    let line = pool.get_message_by_name("shop.v1.Order.Line").unwrap();
    let mut m = DynamicMessage::new(line);
    m.set_field_by_name("sku", Value::String("a".into()));
    let bytes = m.encode_to_vec();
    // [0, 1]: Order, then its second nested message (the map's entry type is the first, as
    // protoc and the Confluent serializers count). Zig-zag: count 2 = 0x04, 0 = 0x00, 1 = 0x02.
    let payload = [&[0x04, 0x00, 0x02][..], &bytes].concat();
    assert_eq!(s.check_payload(&payload), Ok(()));
    assert_eq!(s.record_name(&payload).as_deref(), Some("shop.v1.Order.Line"));
    // 0 alone means [0]: the first message. Index 2 at the top is Refund (enums do not count).
    assert_eq!(s.record_name(&[0x00]).as_deref(), Some("shop.v1.Order"));
    assert_eq!(s.record_name(&[0x02, 0x02]).as_deref(), Some("shop.v1.Refund"));
    assert!(s.check_payload(&[0x02, 0x08]).unwrap_err().contains("no message at index 4"));
    assert!(s.check_payload(&[0x00, 0xff]).unwrap_err().contains("not a valid message"));
    assert!(s.check_payload(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
}

#[test]
fn json_is_written_as_the_first_message_and_read_back() {
    let schema = parse(ORDERS);
    let order = serde_json::json!({
        "id": "o-1", "lines": [{"sku": "s", "quantity": 2}], "counters": {"views": "3"},
        "at": "2026-12-03T10:00:00Z", "card": "4111", "status": "PAID"
    });
    let payload = schema.encode_json(&order, None).unwrap();
    assert_eq!(payload[0], 0, "message indexes [0] are one zero byte");
    assert_eq!(schema.check_payload(&payload), Ok(()));
    let message = DynamicMessage::decode(schema.main.messages().next().unwrap(), &payload[1..]).unwrap();
    assert_eq!(message.get_field_by_name("id").unwrap().as_str(), Some("o-1"));
    let back = schema.decode_json(&payload).unwrap();
    assert_eq!(back, order);
    let refused = [
        (serde_json::json!({"lines": [{"sku": 5}]}), "at /lines/0/sku"),
        (serde_json::json!({"nope": 1}), "unrecognized field name 'nope'"),
        (serde_json::json!({"status": "LOST"}), "at /status"),
    ];
    for (value, want) in refused {
        let got = schema.encode_json(&value, None).unwrap_err();
        assert!(got.contains(want), "{value}: {got}");
    }
    // Another message, nested ones included, named by its full name.
    let refund = schema.encode_json(&serde_json::json!({"orderId": "o-1"}), Some("shop.v1.Refund")).unwrap();
    assert_eq!(&refund[..2], [2, 2], "one index, 1, as zigzag varints");
    assert_eq!(schema.record_name(&refund).as_deref(), Some("shop.v1.Refund"));
    assert_eq!(schema.decode_json(&refund).unwrap(), serde_json::json!({"orderId": "o-1"}));
    let line = schema.encode_json(&serde_json::json!({"sku": "s"}), Some("shop.v1.Order.Line")).unwrap();
    // [0, 1]: the map field's entry message comes first among Order's nested messages.
    assert_eq!(&line[..3], [4, 0, 2], "indexes [0, 1]");
    assert_eq!(schema.record_name(&line).as_deref(), Some("shop.v1.Order.Line"));
    let missing = schema.encode_json(&serde_json::json!({}), Some("shop.v1.Nope")).unwrap_err();
    assert!(missing.contains("no message"), "{missing}");
}

fn kinds(old: &str, new: &str) -> Vec<&'static str> {
    let mut found: Vec<&str> = parse(new).can_read(&parse(old)).iter().map(|d| d.kind).collect();
    found.sort_unstable();
    found
}

#[test]
fn compatibility_follows_confluents_rules() {
    let base = "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }";
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "field added",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } int64 c = 9; } message N { int32 v = 1; }",
            &[],
        ),
        (
            "field removed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "int32 to int64",
            "syntax = \"proto3\"; package p; message M { int64 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "string to bytes",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; bytes b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "int32 to string",
            "syntax = \"proto3\"; package p; message M { string a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "int32 to sint32",
            "syntax = \"proto3\"; package p; message M { sint32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "scalar to message",
            "syntax = \"proto3\"; package p; message M { N a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_KIND_CHANGED"],
        ),
        (
            "named type changed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; K n = 3; oneof o { string x = 4; } } message N { int32 v = 1; } message K { int32 v = 1; }",
            &["FIELD_NAMED_TYPE_CHANGED"],
        ),
        (
            "message removed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; oneof o { string x = 4; } }",
            &["MESSAGE_REMOVED"],
        ),
        (
            // Confluent compares labels only where both are written (proto3 singular: none).
            "numeric made repeated",
            "syntax = \"proto3\"; package p; message M { repeated int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "int32 to an enum",
            "syntax = \"proto3\"; package p; message M { E a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; } enum E { Z = 0; }",
            &[],
        ),
        (
            "whole oneof removed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; } message N { int32 v = 1; }",
            &[],
        ),
        (
            "field renamed",
            "syntax = \"proto3\"; package p; message M { int32 alpha = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "nested message added",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } message Extra { int32 e = 1; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "field removed and reserved",
            "syntax = \"proto3\"; package p; message M { reserved 1; reserved \"a\"; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "int32 to fixed32",
            "syntax = \"proto3\"; package p; message M { fixed32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "int32 to float",
            "syntax = \"proto3\"; package p; message M { float a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "int32 to bool",
            "syntax = \"proto3\"; package p; message M { bool a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "a nested message's field changed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { string v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "message to string",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; string n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_KIND_CHANGED"],
        ),
        (
            "map field added",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } map<string, int32> m = 7; } message N { int32 v = 1; }",
            &[],
        ),
        (
            "string made repeated",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; repeated string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "oneof field removed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string y = 5; } } message N { int32 v = 1; }",
            &["ONEOF_FIELD_REMOVED"],
        ),
        (
            "moved to the existing oneof",
            "syntax = \"proto3\"; package p; message M { oneof o { string x = 4; int32 a = 1; } string b = 2; N n = 3; } message N { int32 v = 1; }",
            &["FIELD_MOVED_TO_EXISTING_ONEOF"],
        ),
        (
            "two moved to a new oneof",
            "syntax = \"proto3\"; package p; message M { oneof z { int32 a = 1; string b = 2; } N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["MULTIPLE_FIELDS_MOVED_TO_ONEOF"],
        ),
        (
            "int32 to uint64 (one wire group)",
            "syntax = \"proto3\"; package p; message M { uint64 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "int32 to sint64",
            "syntax = \"proto3\"; package p; message M { sint64 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_SCALAR_KIND_CHANGED"],
        ),
        (
            "enum added",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; } enum E { E0 = 0; }",
            &[],
        ),
        (
            "new oneof with a new field",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } oneof q { int64 y = 6; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "field added to the oneof",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; int64 y = 6; } } message N { int32 v = 1; }",
            &[],
        ),
        (
            "a nested message's field renamed",
            "syntax = \"proto3\"; package p; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 w = 1; }",
            &[],
        ),
        (
            "package changed",
            "syntax = \"proto3\"; package q; message M { int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["MESSAGE_REMOVED", "MESSAGE_REMOVED", "PACKAGE_CHANGED"],
        ),
    ];
    let mut failures = Vec::new();
    for (case, new, want) in cases {
        let got = kinds(base, new);
        if got != *want {
            failures.push(format!("{case}: got {got:?}, want {want:?}"));
        }
    }
    let proto2 = "syntax = \"proto2\"; message M { optional int32 a = 1; }";
    let required = "syntax = \"proto2\"; message M { optional int32 a = 1; required int32 r = 2; }";
    if kinds(proto2, required) != ["REQUIRED_FIELD_ADDED"] {
        failures.push(format!("required added: {:?}", kinds(proto2, required)));
    }
    if kinds(required, proto2) != ["REQUIRED_FIELD_REMOVED"] {
        failures.push(format!("required removed: {:?}", kinds(required, proto2)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn proto2_defaults_groups_and_extensions_keep_a_canonical_form() {
    let with_defaults = "syntax = \"proto2\"; message M { optional string s = 1 [default = \"a\\\"b\"]; optional int32 n = 2 [default = -3]; }";
    let s = parse(with_defaults);
    assert_eq!(parse(s.canonical()).canonical(), s.canonical());
    // Extensions are not printed: the descriptor itself (base64) is the canonical text.
    let extended = "syntax = \"proto2\"; message M { extensions 100 to 199; } extend M { optional int32 e = 100; }";
    let s = parse(extended);
    let decoded = BASE64.decode(s.canonical()).expect("base64 canonical text");
    assert!(prost_types::FileDescriptorProto::decode(decoded.as_slice()).is_ok());
}

#[test]
fn map_fields_compare_by_key_and_value_not_as_messages() {
    let with_map = "syntax = \"proto3\"; message M { map<string, int32> m = 1; }";
    let without = "syntax = \"proto3\"; message M { }";
    assert_eq!(kinds(with_map, without), Vec::<&str>::new(), "a map field removed");
    let renamed = "syntax = \"proto3\"; message M { map<string, int32> counts = 1; }";
    assert_eq!(kinds(with_map, renamed), Vec::<&str>::new(), "a map field renamed");
    let value_changed = "syntax = \"proto3\"; message M { map<string, string> m = 1; }";
    assert_eq!(kinds(with_map, value_changed), ["FIELD_SCALAR_KIND_CHANGED"]);
    // Written as entry messages, so message indexes count them as protoc does.
    let s = parse(with_map);
    assert!(s.canonical().contains("option map_entry = true;"), "{}", s.canonical());
}

#[test]
fn proto2_labels_and_imported_types_are_compared() {
    let optional = "syntax = \"proto2\"; message M { optional int32 a = 1; }";
    let repeated = "syntax = \"proto2\"; message M { repeated int32 a = 1; }";
    assert_eq!(kinds(optional, repeated), ["FIELD_NUMERIC_LABEL_CHANGED"]);
    let main = "syntax = \"proto3\"; import \"common.proto\"; message Price { c.Money amount = 1; }";
    let money = |t: &str| format!("syntax = \"proto3\"; package c; message Money {{ {t} cents = 1; }}");
    let old = ProtobufSchema::parse(main, &[("common.proto", &money("int64"))]).unwrap();
    let new = ProtobufSchema::parse(main, &[("common.proto", &money("string"))]).unwrap();
    let found: Vec<&str> = new.can_read(&old).iter().map(|d| d.kind).collect();
    assert_eq!(found, ["FIELD_SCALAR_KIND_CHANGED"]);
}

#[test]
fn hostile_schemas_are_refused_before_anything_recurses() {
    let deep = format!("syntax = \"proto3\"; {} {}", "message a {".repeat(100_000), "}".repeat(100_000));
    let e = ProtobufSchema::parse(&deep, &[]).unwrap_err().to_string();
    assert!(e.contains("deeper than"), "{e}");
    // Braces in a comment or a string do not count.
    let quoted = "syntax = \"proto3\"; // {{{{\nmessage M { string s = 1 [json_name = \"{{{{\"]; }";
    assert!(ProtobufSchema::parse(quoted, &[]).is_ok());
    let bad_entry = "syntax = \"proto2\"; message M { message E { option map_entry = true; optional double key = 1; optional string value = 2; } repeated E e = 1; }";
    let e = ProtobufSchema::parse(bad_entry, &[]).unwrap_err().to_string();
    assert!(e.contains("map entry"), "{e}");
    assert!(ProtobufSchema::parse("syntax = \"proto3\"; message M {}", &[("default.proto", "x")]).is_err());
}

#[test]
fn custom_options_are_kept_and_tell_schemas_apart() {
    let options = "syntax = \"proto2\"; package o; import \"google/protobuf/descriptor.proto\"; extend google.protobuf.FieldOptions { optional int32 min_len = 50000; }";
    let main = |n: u32| {
        format!("syntax = \"proto3\"; import \"opts.proto\"; message M {{ string s = 1 [(o.min_len) = {n}]; }}")
    };
    let one = ProtobufSchema::parse(&main(1), &[("opts.proto", options)]).unwrap();
    let five = ProtobufSchema::parse(&main(5), &[("opts.proto", options)]).unwrap();
    assert_ne!(one.canonical(), five.canonical(), "schemas differing only in a custom option");
    assert_ne!(one.serialized(), five.serialized());
    // A custom json_name is kept too.
    let a = parse("syntax = \"proto3\"; message M { string s = 1 [json_name = \"x\"]; }");
    let b = parse("syntax = \"proto3\"; message M { string s = 1 [json_name = \"y\"]; }");
    assert_ne!(a.canonical(), b.canonical());
}

#[test]
fn enums_are_numbers_to_each_other() {
    let a = "syntax = \"proto3\"; message M { A e = 1; } enum A { A0 = 0; } enum B { B0 = 0; }";
    let b = "syntax = \"proto3\"; message M { B e = 1; } enum A { A0 = 0; } enum B { B0 = 0; }";
    assert_eq!(kinds(a, b), Vec::<&str>::new());
    let more = "syntax = \"proto3\"; message M { A e = 1; } enum A { A0 = 0; A1 = 1; } enum B { B0 = 0; }";
    assert_eq!(kinds(a, more), Vec::<&str>::new(), "an enum value added");
}

/// The same schema as [`ORDERS`] written in another order: imports, fields, oneofs, enum values
/// and reserved ranges moved around; messages and enums stay where they are.
const ORDERS_REORDERED: &str = r#"
syntax = "proto3";
package shop.v1;
option java_package = "com.example.shop";
import "google/protobuf/timestamp.proto";

message Order {
  reserved "old";
  reserved 12 to 15, 9;
  optional Status status = 7;
  oneof payment { string iban = 6; string card = 5; }
  google.protobuf.Timestamp at = 4;
  map<string, int64> counters = 3;
  repeated Line lines = 2;
  string id = 1;
  message Line { int32 quantity = 2; string sku = 1; }
}
enum Status { UNKNOWN = 0; PAID = 1; }
message Refund { string order_id = 1; }
"#;

#[test]
fn normalizing_gives_reordered_writings_of_one_schema_one_text() {
    let plain = ProtobufSchema::normalized_text(ORDERS, &[]).expect("normalizes");
    let reordered = ProtobufSchema::normalized_text(ORDERS_REORDERED, &[]).expect("normalizes");
    assert_eq!(plain, reordered);
    // Without normalizing they differ, as Confluent's ids do.
    let canonical = |text| ProtobufSchema::parse(text, &[]).expect("compiles").canonical().to_owned();
    assert_ne!(canonical(ORDERS), canonical(ORDERS_REORDERED));
    // Normalizing is idempotent, and the normalized text means the same schema.
    assert_eq!(ProtobufSchema::normalized_text(&plain, &[]).expect("normalizes"), plain);
    let schema = ProtobufSchema::parse(&plain, &[]).expect("compiles");
    assert_eq!(schema.main.messages().map(|m| m.name().to_owned()).collect::<Vec<_>>(), ["Order", "Refund"]);
    let order = schema.pool.get_message_by_name("shop.v1.Order").expect("Order");
    let numbers: Vec<u32> = order.fields().map(|f| f.number()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7], "fields by number");
}

#[test]
fn a_file_the_printer_cannot_write_is_left_as_it_is() {
    let custom = r#"
syntax = "proto3";
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { string sensitivity = 50000; }
message M { string b = 2 [(sensitivity) = "high"]; string a = 1; }
"#;
    assert_eq!(ProtobufSchema::normalized_text(custom, &[]).expect("compiles"), custom);
}

#[test]
fn builtin_files_are_imported_without_being_registered() {
    for (name, text) in super::BUILTIN_FILES {
        ProtobufSchema::parse(text, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let schema = parse(
        r#"
syntax = "proto3";
package shop.v1;
import "google/type/date.proto";
import "google/type/money.proto";
import "confluent/meta.proto";
import "confluent/types/decimal.proto";

message Invoice {
  google.type.Date due = 1;
  google.type.Money total = 2;
  confluent.type.Decimal rate = 3;
}
"#,
    );
    assert!(schema.canonical().contains("google.type.Money"), "{}", schema.canonical());
    // confluent/meta.proto's options (kept as the descriptor, as every custom option is).
    parse(
        r#"syntax = "proto3"; import "confluent/meta.proto";
message Tagged { string pii = 1 [(confluent.field_meta) = { tags: ["PII"] }]; }"#,
    );
    // A reference of the same name is used instead of the built-in file.
    let own = "syntax = \"proto3\"; package google.type; message Date { string iso = 1; }";
    let with_own = ProtobufSchema::parse(
        "syntax = \"proto3\"; import \"google/type/date.proto\"; message M { google.type.Date d = 1; }",
        &[("google/type/date.proto", own)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let json = with_own.encode_json(&serde_json::json!({"d": {"iso": "2026-12-03"}}), None);
    assert!(json.is_ok(), "{json:?}");
}

#[test]
fn shared_message_types_are_compared_once_each() {
    // Messages are compared by full name, one after another, never by following field types:
    // `T0` to `T30`, each holding two fields of the next, is 31 comparisons, not 2^30 paths.
    let shared = |leaf: &str| {
        let mut text = String::from("syntax = \"proto3\"; package p;");
        for i in 0..30 {
            let next = i + 1;
            text.push_str(&format!(" message T{i} {{ T{next} a = 1; T{next} b = 2; }}"));
        }
        text.push_str(&format!(" message T30 {{ {leaf} x = 1; }}"));
        text
    };
    assert!(parse(&shared("int64")).can_read(&parse(&shared("int32"))).is_empty());
    assert_eq!(kinds(&shared("int32"), &shared("string")), ["FIELD_SCALAR_KIND_CHANGED"]);
}

#[test]
fn a_package_of_many_parts_is_refused_before_its_names_are_built() {
    // prost-reflect names every enclosing package of a package: 10,000 parts (20 KB of text)
    // were 100 MB of names, and a 1 MiB text could be gigabytes.
    let with_package = |parts: usize| {
        let package = vec!["a"; parts].join(".");
        format!("syntax = \"proto3\"; package {package}; message M {{ int32 x = 1; }}")
    };
    let refused = ProtobufSchema::parse(&with_package(10_000), &[]).expect_err("refused").to_string();
    assert!(refused.contains("bytes of names"), "{refused}");
    assert!(ProtobufSchema::parse(&with_package(100), &[]).is_ok());
    // The bound holds for a schema with its references together.
    let reference = with_package(4_000).replace("message M", "message R");
    let importing = "syntax = \"proto3\"; package b; import \"r.proto\"; message N { int32 y = 1; }";
    assert!(ProtobufSchema::parse(importing, &[("r.proto", &reference)]).is_ok());
    let references: Vec<(String, String)> =
        (0..8).map(|i| (format!("r{i}.proto"), reference.replace("message R", &format!("message R{i}")))).collect();
    let imports: String = references.iter().map(|(name, _)| format!("import \"{name}\"; ")).collect();
    let refs: Vec<(&str, &str)> = references.iter().map(|(name, text)| (name.as_str(), text.as_str())).collect();
    let refused =
        ProtobufSchema::parse(&format!("syntax = \"proto3\"; package b; {imports}"), &refs).expect_err("refused");
    assert!(refused.to_string().contains("bytes of names"), "{refused}");
}

/// The cost fuzzer's Protobuf properties (`crate::tests::fuzz_config` sets how many cases).
mod cost {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::super::{ProtobufSchema, name_bytes};
    use crate::limits;

    /// Messages `T0` to `T{depth}` (issue 52's shared types): each but the last has `fanout`
    /// fields of the next; the last one `int32`. Flat, so nesting bounds do not apply, and
    /// `fanout^depth` paths through it. In a package of `parts` parts.
    fn shared_messages(depth: usize, fanout: usize, parts: usize) -> String {
        let package = if parts == 0 { String::new() } else { format!("package {};", vec!["p"; parts].join(".")) };
        let mut text = format!("syntax = \"proto3\"; {package}");
        for i in 0..depth {
            let fields: String = (0..fanout).map(|f| format!(" T{} f{f} = {};", i + 1, f + 1)).collect();
            text.push_str(&format!(" message T{i} {{{fields} }}"));
        }
        text.push_str(&format!(" message T{depth} {{ int32 x = 1; }}"));
        text
    }

    proptest! {
        #![proptest_config(crate::tests::fuzz_config())]

        /// A schema parses exactly when its names fit their budget, is compared with itself in
        /// time, and either way is answered quickly.
        #[test]
        fn names_and_comparisons_stay_within_their_budgets(
            depth in 1usize..=30,
            fanout in 1usize..=3,
            parts in prop_oneof![0usize..=64, 4_000usize..=12_000],
        ) {
            let text = shared_messages(depth, fanout, parts);
            let started = Instant::now();
            let file = protox::file::File::from_source("default.proto", &text).expect("the generated text parses");
            let names = name_bytes(file.file_descriptor_proto());
            match ProtobufSchema::parse(&text, &[]) {
                Ok(schema) => {
                    prop_assert!(names <= limits::PROTOBUF_NAME_BYTES_MAX);
                    prop_assert!(schema.can_read(&schema).is_empty());
                }
                Err(e) => {
                    prop_assert!(names > limits::PROTOBUF_NAME_BYTES_MAX, "{e}");
                    prop_assert!(e.to_string().contains("bytes of names"), "{e}");
                }
            }
            prop_assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        }
    }
}
