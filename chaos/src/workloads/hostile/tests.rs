//! The hostile tenant's schemas and values, byte for byte where a wrong byte would turn an
//! attack on the work budgets into a refused record.

use serde_json::{Value, json};

use super::shared_types::{Language, avro, avro_chain, framed, json_schema, protobuf, protobuf_chain};

#[test]
fn the_deepest_schemas_parse_within_json_nesting_limits() {
    // serde_json stops at 128 levels; a text past it would be refused unread, testing nothing.
    for text in [avro(20, "long", 3), json_schema(24, json!({"type": "integer"}))] {
        let parsed: Result<Value, _> = serde_json::from_str(&text);
        assert!(parsed.is_ok(), "{parsed:?}");
    }
}

#[test]
fn each_level_of_a_schema_is_defined_once_and_used_twice() {
    let text = avro(3, "long", 0);
    assert_eq!(text.matches(r#""name":"T3""#).count(), 1, "{text}");
    assert_eq!(text.matches(r#""T3""#).count(), 2, "defined once, named once more: {text}");
    let text = protobuf(30, "int64", 0);
    assert_eq!(text.matches("message M").count(), 31, "{text}");
    assert_eq!(text.matches("M30 ").count(), 3, "two fields of M29, and its definition: {text}");
    let schema: Value = serde_json::from_str(&json_schema(24, json!({"type": "integer"}))).unwrap_or_default();
    let definitions = schema["$defs"].as_object().map_or(0, serde_json::Map::len);
    assert_eq!(definitions, 25);
    assert_eq!(schema["$defs"]["d23"]["allOf"][1]["$ref"], "#/$defs/d24");
}

#[test]
fn versions_differ_from_each_other_and_from_the_incompatible_schemas() {
    for language in Language::ALL {
        assert_ne!(language.version(5, 0), language.version(5, 1), "{language:?}");
        assert_ne!(language.version(5, 0), language.incompatible(5, 0), "{language:?}");
        assert_ne!(language.incompatible(5, 0), language.incompatible(5, 1), "{language:?}");
    }
}

#[test]
fn a_schemas_text_grows_linearly_with_its_depth() {
    for language in Language::ALL {
        let (shallow, deep) = (language.version(10, 0).len(), language.version(20, 0).len());
        assert!(deep < 3 * shallow, "{language:?}: {shallow} bytes at depth 10, {deep} at 20");
    }
}

#[test]
fn avro_values_go_down_field_a_and_back_up_through_b() {
    // T0 {a: null, b: null}.
    assert_eq!(avro_chain(2, 0, 0), [0, 0]);
    // T0 {a: T1 {a: null, b: null}, b: null}.
    assert_eq!(avro_chain(2, 0, 1), [2, 0, 0, 0]);
    // T0 {a: T1 {a: T2 {n: 2, x0: 0}, b: null}, b: null}.
    assert_eq!(avro_chain(2, 1, 2), [2, 2, 4, 0, 0, 0]);
    assert_eq!(avro_chain(2, 1, 9), avro_chain(2, 1, 2), "a chain stops at the bottom");
}

#[test]
fn protobuf_values_nest_through_field_a() {
    assert!(protobuf_chain(2, 0).is_empty());
    // M0 {a: M1 {a: M2 {n: 2}}}.
    assert_eq!(protobuf_chain(2, 2), [0x0a, 4, 0x0a, 2, 0x08, 2]);
}

#[test]
fn framing_names_the_schema_id_and_a_protobuf_schemas_first_message() {
    assert_eq!(framed(Language::Avro, 258, &[7]), [0, 0, 0, 1, 2, 7]);
    assert_eq!(framed(Language::Json, 1, b"1"), [0, 0, 0, 0, 1, b'1']);
    assert_eq!(framed(Language::Protobuf, 1, &[]), [0, 0, 0, 0, 1, 0]);
}
