//! Checks that bytes are one datum of an Avro schema in Avro's binary encoding, without
//! building a value. Hand-written rather than apache-avro's decoder because that decoder
//! recurses once per nesting level of the data: a recursive schema (a linked list) lets a record
//! of a few hundred KiB nest deep enough to overflow the stack, and it allocates every value.
//! Here nesting and work are bounded and nothing is allocated.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::schema::{EnumSchema, Name, UnionSchema};

/// Deepest nesting of records, arrays, maps and unions a datum may have.
pub const DATUM_DEPTH_MAX: usize = 64;

/// Values a datum may hold per byte of its encoding, plus a fixed allowance: values such as
/// `null` or an empty record take no bytes, so a forged array count would otherwise cost
/// unbounded work for a few bytes of input.
const VALUES_PER_BYTE_MAX: usize = 16;
const VALUES_BASE_MAX: usize = 100_000;

/// Walks a datum: the schema's named types, the bytes, where it is, and the work left.
pub(super) struct Datum<'a> {
    names: &'a HashMap<String, Schema>,
    bytes: &'a [u8],
    at: usize,
    values_left: usize,
}

impl<'a> Datum<'a> {
    pub(super) fn new(names: &'a HashMap<String, Schema>, bytes: &'a [u8]) -> Self {
        let values_left = bytes.len().saturating_mul(VALUES_PER_BYTE_MAX).saturating_add(VALUES_BASE_MAX);
        Self { names, bytes, at: 0, values_left }
    }

    /// The datum's size in bytes.
    pub(super) fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// The same walk with another bound on the values read.
    pub(super) fn with_values_left(self, values_left: usize) -> Self {
        Self { values_left, ..self }
    }

    /// Reads one whole datum of `schema`; bytes left over are an error too.
    pub(super) fn check(mut self, schema: &Schema) -> Result<(), String> {
        self.value(schema, 0)?;
        self.finished()
    }

    /// Whether the whole input was read.
    pub(super) fn finished(&self) -> Result<(), String> {
        if self.at != self.bytes.len() {
            return Err(format!("{} bytes follow the datum", self.bytes.len() - self.at));
        }
        Ok(())
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|end| *end <= self.bytes.len()).ok_or_else(|| {
            format!("the datum ends after {} bytes, {n} more expected at byte {}", self.bytes.len(), self.at)
        })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// A zig-zag varint of at most `max_bytes` bytes (5 for int, 10 for long).
    fn varint(&mut self, max_bytes: usize) -> Result<i64, String> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let byte = self.take(1)?[0];
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(format!("a varint longer than {max_bytes} bytes at byte {}", self.at))
    }

    pub(super) fn int(&mut self) -> Result<i64, String> {
        let v = self.varint(5)?;
        if i32::try_from(v).is_err() {
            return Err(format!("int {v} out of range"));
        }
        Ok(v)
    }

    pub(super) fn long(&mut self) -> Result<i64, String> {
        self.varint(10)
    }

    /// A length prefix and that many bytes.
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.long()?;
        let len = usize::try_from(len).map_err(|_| format!("negative length {len}"))?;
        self.take(len)
    }

    pub(super) fn string(&mut self) -> Result<&'a str, String> {
        let at = self.at;
        std::str::from_utf8(self.bytes()?).map_err(|_| format!("a string at byte {at} is not UTF-8"))
    }

    pub(super) fn boolean(&mut self) -> Result<bool, String> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("boolean byte {b}")),
        }
    }

    /// The index of an enum's symbol.
    pub(super) fn enum_index(&mut self, e: &EnumSchema) -> Result<usize, String> {
        let index = self.int()?;
        usize::try_from(index)
            .ok()
            .filter(|i| *i < e.symbols.len())
            .ok_or_else(|| format!("enum {} has no symbol {index}", e.name.fullname(None)))
    }

    /// The branch of a union a value is written as.
    pub(super) fn union_branch<'u>(&mut self, u: &'u UnionSchema) -> Result<&'u Schema, String> {
        let index = self.long()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| u.variants().get(i))
            .ok_or_else(|| format!("a union has no branch {index}"))
    }

    /// The named type a reference names.
    pub(super) fn named(&self, name: &Name) -> Result<&'a Schema, String> {
        self.names.get(&name.fullname(None)).ok_or_else(|| format!("unknown type {name}"))
    }

    /// Counts a value against the work allowed and checks its nesting.
    pub(super) fn enter(&mut self, depth: usize) -> Result<(), String> {
        self.values_left = self.values_left.checked_sub(1).ok_or("more values than the datum's size allows")?;
        if depth > DATUM_DEPTH_MAX {
            return Err(format!("the datum nests deeper than {DATUM_DEPTH_MAX} levels"));
        }
        Ok(())
    }

    /// Array and map blocks: a count (negative: its absolute value, then the block's byte
    /// size), repeated until a zero count; `item` reads one item.
    pub(super) fn blocks(
        &mut self,
        depth: usize,
        mut item: impl FnMut(&mut Self, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        loop {
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                self.long()?;
            }
            for _ in 0..count.unsigned_abs() {
                item(self, depth)?;
            }
        }
    }

    fn value(&mut self, schema: &Schema, depth: usize) -> Result<(), String> {
        self.enter(depth)?;
        match schema {
            Schema::Null => {}
            Schema::Boolean => {
                self.boolean()?;
            }
            Schema::Int | Schema::Date | Schema::TimeMillis => {
                self.int()?;
            }
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => {
                self.long()?;
            }
            Schema::Float => {
                self.take(4)?;
            }
            Schema::Double => {
                self.take(8)?;
            }
            Schema::Bytes | Schema::BigDecimal => {
                self.bytes()?;
            }
            Schema::String | Schema::Uuid => {
                self.string()?;
            }
            Schema::Decimal(d) => self.value(&d.inner, depth)?,
            Schema::Fixed(f) => {
                self.take(f.size)?;
            }
            Schema::Duration => {
                self.take(12)?;
            }
            Schema::Enum(e) => {
                self.enum_index(e)?;
            }
            Schema::Union(u) => {
                let branch = self.union_branch(u)?;
                self.value(branch, depth + 1)?;
            }
            Schema::Record(r) => {
                for field in &r.fields {
                    self.value(&field.schema, depth + 1)?;
                }
            }
            Schema::Array(a) => self.blocks(depth + 1, |d, depth| d.value(&a.items, depth))?,
            Schema::Map(m) => self.blocks(depth + 1, |d, depth| {
                d.string()?;
                d.value(&m.types, depth)
            })?,
            Schema::Ref { name } => {
                let named = self.named(name)?;
                self.value(named, depth)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value;

    use crate::avro::AvroSchema;

    const KITCHEN_SINK: &str = r#"{"type":"record","name":"Sink","namespace":"t","fields":[
        {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
        {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
        {"name":"y","type":"bytes"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
        {"name":"x","type":{"type":"fixed","name":"X","size":3}},
        {"name":"a","type":{"type":"array","items":"int"}},
        {"name":"m","type":{"type":"map","values":"string"}},
        {"name":"u","type":["null","string"]},
        {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;

    fn sink() -> Value {
        Value::Record(vec![
            ("b".into(), Value::Boolean(true)),
            ("i".into(), Value::Int(-7)),
            ("l".into(), Value::Long(1 << 40)),
            ("f".into(), Value::Float(1.5)),
            ("d".into(), Value::Double(-2.25)),
            ("s".into(), Value::String("héllo".into())),
            ("y".into(), Value::Bytes(vec![0, 255])),
            ("e".into(), Value::Enum(1, "B".into())),
            ("x".into(), Value::Fixed(3, vec![1, 2, 3])),
            ("a".into(), Value::Array((0..300).map(Value::Int).collect())),
            ("m".into(), Value::Map([("k".to_owned(), Value::String("v".into()))].into_iter().collect())),
            ("u".into(), Value::Union(1, Box::new(Value::String("set".into())))),
            ("ts".into(), Value::TimestampMillis(1_700_000_000_000)),
        ])
    }

    fn encoded(text: &str, value: Value) -> (AvroSchema, Vec<u8>) {
        let schema = AvroSchema::parse(text, &[]).unwrap();
        let bytes = apache_avro::to_avro_datum(&schema.schema, value).unwrap();
        (schema, bytes)
    }

    #[test]
    fn what_apache_avro_writes_is_one_whole_datum() {
        let (schema, bytes) = encoded(KITCHEN_SINK, sink());
        assert_eq!(schema.check_datum(&bytes), Ok(()));
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(schema.check_datum(&bytes[..cut]).is_err(), "cut at {cut} of {}", bytes.len());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(schema.check_datum(&longer), Err("1 bytes follow the datum".into()));
    }

    #[test]
    fn bad_indexes_booleans_and_strings_are_refused() {
        let text = r#"{"type":"record","name":"R","fields":[
            {"name":"u","type":["null","string"]},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
            {"name":"b","type":"boolean"}]}"#;
        let (schema, good) = encoded(
            text,
            Value::Record(vec![
                ("u".into(), Value::Union(1, Box::new(Value::String("ok".into())))),
                ("e".into(), Value::Enum(0, "A".into())),
                ("b".into(), Value::Boolean(false)),
            ]),
        );
        assert_eq!(schema.check_datum(&good), Ok(()));
        // good = [union 1 → 0x02][len 2 → 0x04]['o' 'k'][enum 0 → 0x00][false → 0x00]
        let mut union = good.clone();
        union[0] = 0x04;
        assert!(schema.check_datum(&union).unwrap_err().contains("no branch 2"));
        let mut utf8 = good.clone();
        utf8[2] = 0xff;
        assert!(schema.check_datum(&utf8).unwrap_err().contains("not UTF-8"));
        let mut symbol = good.clone();
        symbol[4] = 0x02;
        assert!(schema.check_datum(&symbol).unwrap_err().contains("no symbol 1"));
        let mut boolean = good;
        boolean[5] = 0x07;
        assert!(schema.check_datum(&boolean).unwrap_err().contains("boolean byte 7"));
    }

    #[test]
    fn recursive_data_nests_only_so_deep() {
        let list = r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
        let schema = AvroSchema::parse(list, &[]).unwrap();
        // Each level is one union index byte (2 = branch 1); the last says null (0).
        let nested = |levels: usize| [vec![0x02; levels], vec![0x00]].concat();
        assert_eq!(schema.check_datum(&nested(20)), Ok(()));
        let deep = schema.check_datum(&nested(200_000)).unwrap_err();
        assert!(deep.contains("deeper than"), "{deep}");
    }

    #[test]
    fn a_forged_count_of_empty_values_costs_bounded_work() {
        let schema = AvroSchema::parse(r#"{"type":"array","items":"null"}"#, &[]).unwrap();
        // One block claiming 2^62 nulls, in 10 bytes.
        let mut forged = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        forged.push(0);
        let e = schema.check_datum(&forged).unwrap_err();
        assert!(e.contains("more values"), "{e}");
        // An honest array of 1,000 nulls: one count, then the end.
        let (schema, bytes) = encoded(r#"{"type":"array","items":"null"}"#, Value::Array(vec![Value::Null; 1000]));
        assert_eq!(schema.check_datum(&bytes), Ok(()));
    }
}
