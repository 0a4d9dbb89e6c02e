//! Avro's JSON encoding, to and from the binary one: HTTP clients send records as JSON and the
//! agent writes what a Confluent Avro serializer would; reads may ask for records as JSON.
//!
//! JSON in is read as the Avro specification's JSON encoding (a union's value wrapped as
//! `{"branch": value}`, bytes and fixed as strings of code points 0 to 255), and also unwrapped,
//! as devices tend to send it: an unwrapped union value takes the first branch it encodes as.
//! JSON out is always the specification's encoding.

use std::collections::HashMap;

use apache_avro::Schema;
use serde_json::{Map, Value};

use super::Kind;
use super::datum::{DATUM_DEPTH_MAX, Datum};

/// Values a decoded datum may hold beyond one per byte.
const DECODED_VALUES_BASE_MAX: usize = 64;

/// Encoding steps one value may take: trying union branches in turn repeats work, and nested
/// unions would otherwise multiply it.
const ENCODE_STEPS_MAX: usize = 1_000_000;

/// Writes JSON values in Avro's binary encoding.
pub(super) struct Encoder<'a> {
    names: &'a HashMap<String, Schema>,
    out: Vec<u8>,
    steps_left: usize,
    /// Where in the value the encoder is, as a JSON pointer (`/address/zip`), for errors.
    path: String,
}

impl<'a> Encoder<'a> {
    pub(super) fn new(names: &'a HashMap<String, Schema>) -> Self {
        Self { names, out: Vec::new(), steps_left: ENCODE_STEPS_MAX, path: String::new() }
    }

    /// One datum of `schema` holding `value`; errors name where in the value it failed.
    pub(super) fn encode(mut self, schema: &Schema, value: &Value) -> Result<Vec<u8>, String> {
        self.value(schema, value, 0)?;
        Ok(self.out)
    }

    fn fail<T>(&self, why: String) -> Result<T, String> {
        let at = if self.path.is_empty() { "/" } else { &self.path };
        Err(format!("at {at}: {why}"))
    }

    fn long(&mut self, v: i64) {
        let mut n = ((v << 1) ^ (v >> 63)) as u64;
        while n >= 0x80 {
            self.out.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.out.push(n as u8);
    }

    fn length_prefixed(&mut self, bytes: &[u8]) {
        self.long(i64::try_from(bytes.len()).unwrap_or(i64::MAX));
        self.out.extend_from_slice(bytes);
    }

    /// Bytes as Avro's JSON encoding writes them: each code point of the string one byte.
    fn byte_string(&self, value: &Value) -> Result<Vec<u8>, String> {
        let Some(text) = value.as_str() else {
            return self.fail(format!("expected a string of bytes, got {}", kind(value)));
        };
        text.chars()
            .map(|c| {
                u8::try_from(u32::from(c)).or_else(|_| self.fail(format!("{c:?} is not a byte (code points 0 to 255)")))
            })
            .collect()
    }

    fn integer(&self, value: &Value, min: i64, max: i64) -> Result<i64, String> {
        match value.as_i64() {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(v) => self.fail(format!("{v} is outside {min}..={max}")),
            None => self.fail(format!("expected an integer, got {}", kind(value))),
        }
    }

    /// Runs `f` one level down the path.
    fn at<T>(&mut self, segment: &str, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        let len = self.path.len();
        self.path.push('/');
        // JSON pointer escaping, so a key holding `/` still names one step.
        self.path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        let result = f(self);
        self.path.truncate(len);
        result
    }

    fn value(&mut self, schema: &Schema, value: &Value, depth: usize) -> Result<(), String> {
        self.steps_left = match self.steps_left.checked_sub(1) {
            Some(left) => left,
            None => return self.fail(format!("the value takes more than {ENCODE_STEPS_MAX} steps to encode")),
        };
        if depth > DATUM_DEPTH_MAX {
            return self.fail(format!("the value nests deeper than {DATUM_DEPTH_MAX} levels"));
        }
        match schema {
            Schema::Null if value.is_null() => {}
            Schema::Null => return self.fail(format!("expected null, got {}", kind(value))),
            Schema::Boolean => match value.as_bool() {
                Some(b) => self.out.push(u8::from(b)),
                None => return self.fail(format!("expected a boolean, got {}", kind(value))),
            },
            Schema::Int | Schema::Date | Schema::TimeMillis => {
                let v = self.integer(value, i64::from(i32::MIN), i64::from(i32::MAX))?;
                self.long(v);
            }
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => {
                let v = self.integer(value, i64::MIN, i64::MAX)?;
                self.long(v);
            }
            Schema::Float | Schema::Double => {
                // Also the names the decoder (as Jackson) writes for what JSON has no number for.
                let named = match value.as_str() {
                    Some("NaN") => Some(f64::NAN),
                    Some("Infinity") => Some(f64::INFINITY),
                    Some("-Infinity") => Some(f64::NEG_INFINITY),
                    _ => None,
                };
                let Some(v) = value.as_f64().or(named) else {
                    return self.fail(format!("expected a number, got {}", kind(value)));
                };
                if matches!(schema, Schema::Float) {
                    self.out.extend_from_slice(&(v as f32).to_le_bytes());
                } else {
                    self.out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Schema::Bytes | Schema::BigDecimal => {
                let bytes = self.byte_string(value)?;
                self.length_prefixed(&bytes);
            }
            Schema::String | Schema::Uuid => match value.as_str() {
                Some(s) => self.length_prefixed(s.as_bytes()),
                None => return self.fail(format!("expected a string, got {}", kind(value))),
            },
            Schema::Decimal(d) => self.value(&d.inner, value, depth)?,
            Schema::Fixed(f) => {
                let bytes = self.byte_string(value)?;
                if bytes.len() != f.size {
                    return self.fail(format!("{} holds {} bytes, got {}", f.name.fullname(None), f.size, bytes.len()));
                }
                self.out.extend_from_slice(&bytes);
            }
            Schema::Duration => {
                let bytes = self.byte_string(value)?;
                if bytes.len() != 12 {
                    return self.fail(format!("a duration is 12 bytes, got {}", bytes.len()));
                }
                self.out.extend_from_slice(&bytes);
            }
            Schema::Enum(e) => {
                let symbol = value.as_str().unwrap_or_default();
                match e.symbols.iter().position(|s| s == symbol) {
                    Some(i) => self.long(i as i64),
                    None => {
                        return self.fail(format!(
                            "expected a symbol of enum {} ({}), got {}",
                            e.name.fullname(None),
                            e.symbols.join(", "),
                            kind(value)
                        ));
                    }
                }
            }
            Schema::Union(u) => self.union(u.variants(), value, depth)?,
            Schema::Record(r) => {
                let Some(object) = value.as_object() else {
                    return self.fail(format!(
                        "expected an object (record {}), got {}",
                        r.name.fullname(None),
                        kind(value)
                    ));
                };
                if let Some(unknown) = object.keys().find(|k| !r.lookup.contains_key(*k)) {
                    return self.fail(format!("record {} has no field {unknown:?}", r.name.fullname(None)));
                }
                for field in &r.fields {
                    match (object.get(&field.name), &field.default) {
                        (Some(v), _) => self.at(&field.name, |e| e.value(&field.schema, v, depth + 1))?,
                        (None, Some(default)) => {
                            self.at(&field.name, |e| e.value(&field.schema, default, depth + 1))?
                        }
                        (None, None) => {
                            return self.fail(format!("field {:?} is missing and has no default", field.name));
                        }
                    }
                }
            }
            Schema::Array(a) => {
                let Some(items) = value.as_array() else {
                    return self.fail(format!("expected an array, got {}", kind(value)));
                };
                if !items.is_empty() {
                    self.long(items.len() as i64);
                    for (i, item) in items.iter().enumerate() {
                        self.at(&i.to_string(), |e| e.value(&a.items, item, depth + 1))?;
                    }
                }
                self.long(0);
            }
            Schema::Map(m) => {
                let Some(entries) = value.as_object() else {
                    return self.fail(format!("expected an object (a map), got {}", kind(value)));
                };
                if !entries.is_empty() {
                    self.long(entries.len() as i64);
                    for (key, item) in entries {
                        self.length_prefixed(key.as_bytes());
                        self.at(key, |e| e.value(&m.types, item, depth + 1))?;
                    }
                }
                self.long(0);
            }
            Schema::Ref { name } => {
                let names = self.names;
                let Some(named) = names.get(&name.fullname(None)) else {
                    return self.fail(format!("unknown type {name}"));
                };
                self.value(named, value, depth)?;
            }
        }
        Ok(())
    }

    /// A union: `null` is the null branch; `{"branch": v}` is that branch when the key names
    /// one; anything else is the first branch it encodes as.
    fn union(&mut self, branches: &[Schema], value: &Value, depth: usize) -> Result<(), String> {
        if let Some(object) = value.as_object()
            && object.len() == 1
            && let Some((name, inner)) = object.iter().next()
            && let Some(i) = branches.iter().position(|b| branch_name(b) == *name)
        {
            self.long(i as i64);
            return self.at(name, |e| e.value(&branches[i], inner, depth + 1));
        }
        let start = self.out.len();
        let mut tried = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            self.long(i as i64);
            match self.value(branch, value, depth + 1) {
                Ok(()) => return Ok(()),
                Err(why) if self.steps_left == 0 => return Err(why),
                Err(_) => {
                    self.out.truncate(start);
                    tried.push(branch_name(branch));
                }
            }
        }
        self.fail(format!("{} matches no branch of the union [{}]", kind(value), tried.join(", ")))
    }
}

/// A union branch's name in Avro's JSON encoding: the type's name, a named type's full name
/// (a logical type is named by its underlying type).
fn branch_name(schema: &Schema) -> String {
    match schema {
        Schema::Decimal(d) => branch_name(&d.inner),
        Schema::Record(r) => r.name.fullname(None),
        Schema::Enum(e) => e.name.fullname(None),
        Schema::Fixed(f) => f.name.fullname(None),
        Schema::Ref { name } => name.fullname(None),
        other => Kind::of(other).name().into(),
    }
}

/// What a JSON value is, for errors (the value itself only when short).
fn kind(value: &Value) -> String {
    match value {
        Value::Object(_) => "an object".into(),
        Value::Array(_) => "an array".into(),
        Value::String(s) if s.chars().count() > 40 => "a long string".into(),
        scalar => scalar.to_string(),
    }
}

impl Datum<'_> {
    /// Reads one whole datum of `schema` as Avro's JSON encoding; bytes left over are an error.
    pub(super) fn into_json(self, schema: &Schema) -> Result<Value, String> {
        // Every value decoded is built: at most one per byte of the datum, and a few more for
        // values that take no bytes (nulls, empty records), so output is bounded by input.
        let values = self.bytes_len().saturating_add(DECODED_VALUES_BASE_MAX);
        self.with_values_left(values).decode(schema)
    }

    fn decode(mut self, schema: &Schema) -> Result<Value, String> {
        let value = self.json(schema, 0)?;
        self.finished()?;
        Ok(value)
    }

    fn json(&mut self, schema: &Schema, depth: usize) -> Result<Value, String> {
        self.enter(depth)?;
        Ok(match schema {
            Schema::Null => Value::Null,
            Schema::Boolean => Value::Bool(self.boolean()?),
            Schema::Int | Schema::Date | Schema::TimeMillis => self.int()?.into(),
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => self.long()?.into(),
            Schema::Float => {
                let raw: [u8; 4] = self.take(4)?.try_into().map_err(|_| "a float of 4 bytes")?;
                number(f64::from(f32::from_le_bytes(raw)))
            }
            Schema::Double => {
                let raw: [u8; 8] = self.take(8)?.try_into().map_err(|_| "a double of 8 bytes")?;
                number(f64::from_le_bytes(raw))
            }
            Schema::Bytes | Schema::BigDecimal => Value::String(self.bytes()?.iter().map(|b| char::from(*b)).collect()),
            Schema::String | Schema::Uuid => Value::String(self.string()?.to_owned()),
            Schema::Decimal(d) => self.json(&d.inner, depth)?,
            Schema::Fixed(f) => Value::String(self.take(f.size)?.iter().map(|b| char::from(*b)).collect()),
            Schema::Duration => Value::String(self.take(12)?.iter().map(|b| char::from(*b)).collect()),
            Schema::Enum(e) => Value::String(e.symbols[self.enum_index(e)?].clone()),
            Schema::Union(u) => {
                let branch = self.union_branch(u)?;
                match branch {
                    Schema::Null => Value::Null,
                    other => {
                        let inner = self.json(other, depth + 1)?;
                        Value::Object(Map::from_iter([(branch_name(other), inner)]))
                    }
                }
            }
            Schema::Record(r) => {
                let mut object = Map::new();
                for field in &r.fields {
                    object.insert(field.name.clone(), self.json(&field.schema, depth + 1)?);
                }
                Value::Object(object)
            }
            Schema::Array(a) => {
                let mut items = Vec::new();
                self.blocks(depth + 1, |d, depth| {
                    items.push(d.json(&a.items, depth)?);
                    Ok(())
                })?;
                Value::Array(items)
            }
            Schema::Map(m) => {
                let mut entries = Map::new();
                self.blocks(depth + 1, |d, depth| {
                    let key = d.string()?.to_owned();
                    entries.insert(key, d.json(&m.types, depth)?);
                    Ok(())
                })?;
                Value::Object(entries)
            }
            Schema::Ref { name } => {
                let named = self.named(name)?;
                self.json(named, depth)?
            }
        })
    }
}

/// A JSON number, or Jackson's names for the values JSON has no number for.
fn number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or_else(
        || {
            Value::String(if v.is_nan() {
                "NaN".into()
            } else if v > 0.0 {
                "Infinity".into()
            } else {
                "-Infinity".into()
            })
        },
        Value::Number,
    )
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as Avro;
    use serde_json::json;

    use crate::avro::AvroSchema;

    const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
        {"name":"id","type":"long"},
        {"name":"note","type":["null","string"],"default":null},
        {"name":"qty","type":"int","default":1},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"attrs","type":{"type":"map","values":"double"}},
        {"name":"state","type":{"type":"enum","name":"State","symbols":["NEW","PAID"]}},
        {"name":"raw","type":"bytes"},
        {"name":"code","type":{"type":"fixed","name":"Code","size":2}},
        {"name":"next","type":["null","Order"],"default":null}]}"#;

    fn order() -> AvroSchema {
        AvroSchema::parse(ORDER, &[]).unwrap()
    }

    fn expected_bytes(schema: &AvroSchema, note: Option<&str>) -> Vec<u8> {
        let note = match note {
            None => Avro::Union(0, Box::new(Avro::Null)),
            Some(n) => Avro::Union(1, Box::new(Avro::String(n.into()))),
        };
        let value = Avro::Record(vec![
            ("id".into(), Avro::Long(7)),
            ("note".into(), note),
            ("qty".into(), Avro::Int(1)),
            ("tags".into(), Avro::Array(vec![Avro::String("a".into())])),
            ("attrs".into(), Avro::Map([("w".to_owned(), Avro::Double(0.5))].into_iter().collect())),
            ("state".into(), Avro::Enum(1, "PAID".into())),
            ("raw".into(), Avro::Bytes(vec![0, 255])),
            ("code".into(), Avro::Fixed(2, vec![b'o', b'k'])),
            ("next".into(), Avro::Union(0, Box::new(Avro::Null))),
        ]);
        apache_avro::to_avro_datum(&schema.schema, value).unwrap()
    }

    fn order_json(note: serde_json::Value) -> serde_json::Value {
        json!({"id": 7, "note": note, "tags": ["a"], "attrs": {"w": 0.5}, "state": "PAID",
               "raw": "\u{0}\u{ff}", "code": "ok"})
    }

    #[test]
    fn json_encodes_as_apache_avro_writes_the_same_value() {
        let schema = order();
        // Defaults fill `qty` and `next`; the union is written wrapped, as Avro's JSON encoding has it.
        let wrapped = schema.encode_json(&order_json(json!({"string": "gift"}))).unwrap();
        assert_eq!(wrapped, expected_bytes(&schema, Some("gift")));
        // Devices send union values unwrapped: the first branch they fit.
        let bare = schema.encode_json(&order_json(json!("gift"))).unwrap();
        assert_eq!(bare, wrapped);
        let null = schema.encode_json(&order_json(json!(null))).unwrap();
        assert_eq!(null, expected_bytes(&schema, None));
    }

    #[test]
    fn binary_decodes_to_avros_json_encoding_and_back() {
        let schema = order();
        let bytes = expected_bytes(&schema, Some("gift"));
        let decoded = schema.decode_json(&bytes).unwrap();
        let mut want = order_json(json!({"string": "gift"}));
        want["qty"] = json!(1);
        want["next"] = json!(null);
        assert_eq!(decoded, want);
        assert_eq!(schema.encode_json(&decoded).unwrap(), bytes);
        assert!(schema.decode_json(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_recursive_record_nests_through_its_union() {
        let schema = order();
        let mut inner = order_json(json!(null));
        inner["next"] = json!({"shop.Order": order_json(json!("x"))});
        let bytes = schema.encode_json(&inner).unwrap();
        assert_eq!(schema.check_datum(&bytes), Ok(()));
        let back = schema.decode_json(&bytes).unwrap();
        assert_eq!(back["next"]["shop.Order"]["note"], json!({"string": "x"}));
    }

    #[test]
    fn errors_name_the_place_in_the_value() {
        let schema = order();
        let cases = [
            (json!({"id": "7"}), "at /id: expected an integer"),
            (json!(5), "at /: expected an object (record shop.Order)"),
            (order_json(json!(3)), "at /note: 3 matches no branch of the union [null, string]"),
            (
                {
                    let mut v = order_json(json!(null));
                    v["tags"] = json!(["a", 2]);
                    v
                },
                "at /tags/1: expected a string, got 2",
            ),
            (
                {
                    let mut v = order_json(json!(null));
                    v["state"] = json!("LOST");
                    v
                },
                "at /state: expected a symbol of enum shop.State (NEW, PAID)",
            ),
            (
                {
                    let mut v = order_json(json!(null));
                    v["code"] = json!("abc");
                    v
                },
                "at /code: shop.Code holds 2 bytes, got 3",
            ),
            (
                {
                    let mut v = order_json(json!(null));
                    v["raw"] = json!("\u{100}");
                    v
                },
                "is not a byte",
            ),
            (
                {
                    let mut v = order_json(json!(null));
                    v["extra"] = json!(1);
                    v
                },
                "record shop.Order has no field \"extra\"",
            ),
            (json!({"id": 1}), "field \"tags\" is missing and has no default"),
        ];
        for (value, want) in cases {
            let got = schema.encode_json(&value).unwrap_err();
            assert!(got.contains(want), "{value}: got {got:?}, want {want:?}");
        }
        let int = AvroSchema::parse(r#""int""#, &[]).unwrap();
        assert!(int.encode_json(&json!(1_i64 << 40)).unwrap_err().contains("outside"));
    }

    #[test]
    fn decoding_builds_no_more_values_than_the_datum_has_bytes() {
        // 100,000 nulls take 4 bytes: fine to check without building anything, too many to build.
        let schema = AvroSchema::parse(r#"{"type":"array","items":"null"}"#, &[]).unwrap();
        let bytes = apache_avro::to_avro_datum(&schema.schema, Avro::Array(vec![Avro::Null; 100_000])).unwrap();
        assert_eq!(bytes.len(), 4);
        assert_eq!(schema.check_datum(&bytes), Ok(()));
        assert!(schema.decode_json(&bytes).unwrap_err().contains("more values"));
        let few = apache_avro::to_avro_datum(&schema.schema, Avro::Array(vec![Avro::Null; 50])).unwrap();
        assert_eq!(schema.decode_json(&few).unwrap(), json!(vec![serde_json::Value::Null; 50]));
    }

    #[test]
    fn floats_json_has_no_number_for_round_trip_by_name() {
        let schema = AvroSchema::parse(r#"{"type":"array","items":"double"}"#, &[]).unwrap();
        let named = json!(["NaN", "Infinity", "-Infinity", 1.5]);
        let bytes = schema.encode_json(&named).unwrap();
        assert_eq!(schema.decode_json(&bytes).unwrap(), named);
        // A union's branches are all tried even when the data reads like a step-limit message.
        let union = AvroSchema::parse(r#"["int","string"]"#, &[]).unwrap();
        assert!(union.encode_json(&json!("more than")).is_ok());
    }

    #[test]
    fn nested_unions_cannot_make_encoding_unbounded() {
        // Each level is a union of two records with the same field, both tried before the value
        // fails at the bottom: 2^levels attempts without a bound on the steps.
        const LEVELS: usize = 20;
        let record = |name: String, field_type: &str| {
            format!(r#"{{"type":"record","name":"{name}","fields":[{{"name":"a","type":{field_type}}}]}}"#)
        };
        let mut union = format!(r#"["null",{},{}]"#, record("A0".into(), r#""int""#), record("B0".into(), r#""int""#));
        for i in 1..LEVELS {
            let by_name = format!(r#"["null","A{j}","B{j}"]"#, j = i - 1);
            union = format!(r#"["null",{},{}]"#, record(format!("A{i}"), &union), record(format!("B{i}"), &by_name));
        }
        let schema = AvroSchema::parse(&record("Top".into(), &union), &[]).unwrap();
        let mut value = json!("not an int");
        for _ in 0..=LEVELS {
            value = json!({ "a": value });
        }
        let err = schema.encode_json(&value).unwrap_err();
        assert!(err.contains("more than 1000000 steps"), "{err}");
    }
}
