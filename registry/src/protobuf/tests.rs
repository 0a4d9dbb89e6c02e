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
            "numeric made repeated",
            "syntax = \"proto3\"; package p; message M { repeated int32 a = 1; string b = 2; N n = 3; oneof o { string x = 4; } } message N { int32 v = 1; }",
            &["FIELD_NUMERIC_LABEL_CHANGED"],
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
