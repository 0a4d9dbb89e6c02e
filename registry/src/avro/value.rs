//! A datum decoded into apache-avro's `Value`, bounded as [`super::AvroSchema::check_datum`]
//! is (nesting and values per byte), for readers that need the values themselves (table
//! topics). Values keep their physical form: logical types (dates, timestamps, decimals) are
//! the ints, longs and bytes they are written as, read together with the schema.

use apache_avro::Schema;
use apache_avro::types::Value;

use super::datum::Datum;

/// Values built beyond one per byte of the datum (nulls and empty records take no bytes).
const DECODED_VALUES_BASE_MAX: usize = 10_000;

impl Datum<'_> {
    pub(super) fn into_value(self, schema: &Schema) -> Result<Value, String> {
        let values = self.bytes_len().saturating_add(DECODED_VALUES_BASE_MAX);
        let mut datum = self.with_values_left(values);
        let value = datum.value_of(schema, 0)?;
        datum.finished()?;
        Ok(value)
    }

    fn value_of(&mut self, schema: &Schema, depth: usize) -> Result<Value, String> {
        self.enter(depth)?;
        Ok(match schema {
            Schema::Null => Value::Null,
            Schema::Boolean => Value::Boolean(self.boolean()?),
            Schema::Int | Schema::Date | Schema::TimeMillis => Value::Int(self.int()? as i32),
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => Value::Long(self.long()?),
            Schema::Float => {
                let raw: [u8; 4] = self.take(4)?.try_into().map_err(|_| "a float of 4 bytes")?;
                Value::Float(f32::from_le_bytes(raw))
            }
            Schema::Double => {
                let raw: [u8; 8] = self.take(8)?.try_into().map_err(|_| "a double of 8 bytes")?;
                Value::Double(f64::from_le_bytes(raw))
            }
            Schema::Bytes | Schema::BigDecimal => Value::Bytes(self.bytes()?.to_vec()),
            Schema::String | Schema::Uuid => Value::String(self.string()?.to_owned()),
            Schema::Decimal(d) => self.value_of(&d.inner, depth)?,
            Schema::Fixed(f) => Value::Fixed(f.size, self.take(f.size)?.to_vec()),
            Schema::Duration => Value::Fixed(12, self.take(12)?.to_vec()),
            Schema::Enum(e) => {
                let index = self.enum_index(e)?;
                Value::Enum(index as u32, e.symbols[index].clone())
            }
            Schema::Union(u) => {
                let index = self.long()?;
                let branch = usize::try_from(index)
                    .ok()
                    .and_then(|i| u.variants().get(i))
                    .ok_or_else(|| format!("a union has no branch {index}"))?;
                Value::Union(index as u32, Box::new(self.value_of(branch, depth + 1)?))
            }
            Schema::Record(r) => {
                let mut fields = Vec::with_capacity(r.fields.len());
                for field in &r.fields {
                    fields.push((field.name.clone(), self.value_of(&field.schema, depth + 1)?));
                }
                Value::Record(fields)
            }
            Schema::Array(a) => {
                let mut items = Vec::new();
                self.blocks(depth + 1, |d, depth| {
                    items.push(d.value_of(&a.items, depth)?);
                    Ok(())
                })?;
                Value::Array(items)
            }
            Schema::Map(m) => {
                let mut entries = std::collections::HashMap::new();
                self.blocks(depth + 1, |d, depth| {
                    let key = d.string()?.to_owned();
                    entries.insert(key, d.value_of(&m.types, depth)?);
                    Ok(())
                })?;
                Value::Map(entries)
            }
            Schema::Ref { name } => {
                let named = self.named(name)?;
                self.value_of(named, depth)?
            }
        })
    }
}
