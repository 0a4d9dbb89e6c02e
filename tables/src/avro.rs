//! Avro values as table columns: the Iceberg type an Avro schema maps to, how a table's schema
//! evolves when a record arrives with a newer writer schema, and filling a row's value columns
//! from a decoded datum.
//!
//! A record value's fields are the table's value columns (ids from [`VALUE_FIELD_ID_START`]); any
//! other value is one column, `value`. Every value column and nested field is optional, so a
//! field added by a new schema version is always a legal evolution and old rows read as null.
//! Fields are matched by name; a field a writer drops keeps its column, null in new rows.
//!
//! Types: boolean, int, long, float, double, string, bytes, fixed as themselves; enum and uuid
//! as string; decimal up to 38 digits as decimal (wider as string); date; time-millis and
//! time-micros as time; timestamp-* as timestamptz and local-timestamp-* as timestamp (both in
//! microseconds, so nanoseconds are truncated); `[null, T]` as an optional T; record, array and
//! map as struct, list and map<string, V>. A union of several non-null types, a recursive type,
//! anything nested deeper than [`NESTING_MAX`] and a record, array or map whose fields would take
//! the table past [`VALUE_FIELDS_MAX`] become a string holding Avro's JSON encoding.

pub use apache_avro::Schema;
use apache_avro::schema::RecordSchema;
pub use apache_avro::types::Value;
use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
};
use serde_json::json;

use crate::TableError;
use crate::data::{append_null, downcast, struct_child};
use crate::evolution::{FieldIds, Incompatible, VALUE_COLUMN};
use crate::schema::{IcebergSchema, IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType};

pub use crate::evolution::{NESTING_MAX, VALUE_FIELD_ID_START, VALUE_FIELDS_MAX};

/// Widest decimal Iceberg stores (Decimal128).
const DECIMAL_PRECISION_MAX: usize = 38;

/// Named types of the writer schema, by full name (its own and its references').
pub trait NamedTypes {
    fn named(&self, full_name: &str) -> Option<&Schema>;
}

/// The writer schema with named types resolved.
fn resolve<'a>(schema: &'a Schema, names: &'a dyn NamedTypes) -> &'a Schema {
    match schema {
        Schema::Ref { name } => names.named(&name.fullname(None)).unwrap_or(schema),
        other => other,
    }
}

/// The non-null branch of `[null, T]` (or `[T, null]`).
fn optional_branch(schema: &Schema) -> Option<&Schema> {
    let Schema::Union(union) = schema else { return None };
    match union.variants() {
        [Schema::Null, other] | [other, Schema::Null] => Some(other),
        _ => None,
    }
}

/// Maps one Avro type; `stack` holds the named types being expanded (recursion ends there).
fn map_type(
    schema: &Schema,
    names: &dyn NamedTypes,
    path: &str,
    ids: &mut FieldIds,
    stack: &mut Vec<String>,
) -> IcebergType {
    use PrimitiveType as P;
    let json_string = IcebergType::Primitive(P::String);
    if stack.len() > NESTING_MAX {
        return json_string;
    }
    if let Schema::Ref { name } = schema {
        let full = name.fullname(None);
        if stack.contains(&full) {
            return json_string;
        }
        return match names.named(&full) {
            Some(named) => map_type(named, names, path, ids, stack),
            None => json_string,
        };
    }
    // A nested type is mapped only if its own fields (a list's element, a map's key and value)
    // fit under the cap.
    let nested_fields = match schema {
        Schema::Record(record) => record.fields.len(),
        Schema::Array(_) => 1,
        Schema::Map(_) => 2,
        _ => 0,
    };
    if !ids.reserve(nested_fields) {
        return json_string;
    }
    let primitive = |p| IcebergType::Primitive(p);
    match schema {
        Schema::Null | Schema::String | Schema::Uuid | Schema::Enum(_) | Schema::BigDecimal => primitive(P::String),
        Schema::Boolean => primitive(P::Boolean),
        Schema::Int => primitive(P::Int),
        Schema::Long => primitive(P::Long),
        Schema::Float => primitive(P::Float),
        Schema::Double => primitive(P::Double),
        Schema::Bytes => primitive(P::Binary),
        Schema::Fixed(fixed) => primitive(P::Fixed(u32::try_from(fixed.size).unwrap_or(u32::MAX))),
        Schema::Duration => primitive(P::Fixed(12)),
        Schema::Decimal(decimal) if decimal.precision <= DECIMAL_PRECISION_MAX => {
            primitive(P::Decimal { precision: decimal.precision as u8, scale: decimal.scale as u8 })
        }
        Schema::Decimal(_) => primitive(P::String),
        Schema::Date => primitive(P::Date),
        Schema::TimeMillis | Schema::TimeMicros => primitive(P::Time),
        Schema::TimestampMillis | Schema::TimestampMicros | Schema::TimestampNanos => primitive(P::Timestamptz),
        Schema::LocalTimestampMillis | Schema::LocalTimestampMicros | Schema::LocalTimestampNanos => {
            primitive(P::Timestamp)
        }
        Schema::Union(_) => match optional_branch(schema) {
            Some(inner) => map_type(inner, names, path, ids, stack),
            None => json_string,
        },
        Schema::Record(record) => {
            IcebergType::Struct(StructType { fields: record_fields(record, names, path, ids, stack) })
        }
        Schema::Array(array) => {
            let element_path = format!("{path}.element");
            let element_id = ids.id(&element_path);
            stack.push(String::new());
            let element = map_type(&array.items, names, &element_path, ids, stack);
            stack.pop();
            IcebergType::List(Box::new(ListType { element_id, element_required: false, element }))
        }
        Schema::Map(map) => {
            let key_id = ids.id(&format!("{path}.key"));
            let value_path = format!("{path}.value");
            let value_id = ids.id(&value_path);
            stack.push(String::new());
            let value = map_type(&map.types, names, &value_path, ids, stack);
            stack.pop();
            IcebergType::Map(Box::new(MapType {
                key_id,
                key: IcebergType::Primitive(P::String),
                value_id,
                value_required: false,
                value,
            }))
        }
        Schema::Ref { .. } => json_string,
    }
}

/// A record's fields as struct fields (their ids taken from the cap already).
fn record_fields(
    record: &RecordSchema,
    names: &dyn NamedTypes,
    path: &str,
    ids: &mut FieldIds,
    stack: &mut Vec<String>,
) -> Vec<NestedField> {
    stack.push(record.name.fullname(None));
    let fields = record
        .fields
        .iter()
        .map(|field| {
            let field_path = format!("{path}.{}", field.name);
            let id = ids.id(&field_path);
            let field_type = map_type(&field.schema, names, &field_path, ids, stack);
            NestedField::new(id, &field.name, false, field_type)
        })
        .collect();
    stack.pop();
    fields
}

/// The value columns a writer schema gives: a record's fields, or one `value` column.
fn writer_columns(writer: &Schema, names: &dyn NamedTypes, ids: &mut FieldIds) -> Vec<NestedField> {
    let root = resolve(writer, names);
    match root {
        Schema::Record(record) => {
            ids.take(record.fields.len());
            record_fields(record, names, "", ids, &mut Vec::new())
        }
        other => {
            ids.take(1);
            let id = ids.id(&format!(".{VALUE_COLUMN}"));
            let path = format!(".{VALUE_COLUMN}");
            vec![NestedField::new(id, VALUE_COLUMN, false, map_type(other, names, &path, ids, &mut Vec::new()))]
        }
    }
}

/// The table schema widened to hold records of `writer`, with the new `last-column-id`; `None`
/// when the table already holds them as they are.
pub fn evolve(
    table: &IcebergSchema,
    last_column_id: i32,
    writer: &Schema,
    names: &dyn NamedTypes,
) -> Result<Option<(IcebergSchema, i32)>, Incompatible> {
    crate::evolution::evolve(table, last_column_id, |ids| writer_columns(writer, names, ids))
}

/// Appends one record's value columns: `value` decoded with `writer`, or a tombstone (`None`),
/// into `columns` (the value column builders of a table of `schema`).
pub fn append_value(
    columns: &mut [Box<dyn ArrayBuilder>],
    schema: &IcebergSchema,
    writer: &Schema,
    names: &dyn NamedTypes,
    value: Option<&Value>,
) -> Result<(), TableError> {
    let value_fields = schema.fields.iter().filter(|f| f.id >= VALUE_FIELD_ID_START);
    if value_fields.clone().count() != columns.len() {
        return Err(TableError::Invalid("value columns do not match the table schema".into()));
    }
    let root = resolve(writer, names);
    for (field, column) in value_fields.zip(columns.iter_mut()) {
        let found = match (value, root) {
            (Some(Value::Record(values)), Schema::Record(record)) => {
                record.fields.iter().zip(values).find(|(f, _)| f.name == field.name).map(|(f, (_, v))| (&f.schema, v))
            }
            (Some(value), _) if field.name == VALUE_COLUMN => Some((writer, value)),
            _ => None,
        };
        let mut appender = Appender { names, depth: 0 };
        match found {
            Some((field_schema, value)) => appender.append(column.as_mut(), &field.field_type, field_schema, value)?,
            None => append_null(column.as_mut(), &field.field_type)?,
        }
    }
    Ok(())
}

struct Appender<'a> {
    names: &'a dyn NamedTypes,
    depth: usize,
}

impl Appender<'_> {
    /// Appends `value`, written with `schema`, to a column of `field_type`.
    fn append(
        &mut self,
        builder: &mut dyn ArrayBuilder,
        field_type: &IcebergType,
        schema: &Schema,
        value: &Value,
    ) -> Result<(), TableError> {
        use PrimitiveType as P;
        let schema = resolve(schema, self.names);
        // `[null, T]`: the branch, or a null.
        let (schema, value) = match (schema, value) {
            (Schema::Union(_), Value::Union(_, inner)) if optional_branch(schema).is_some() => match inner.as_ref() {
                Value::Null => return append_null(builder, field_type),
                inner => (resolve(optional_branch(schema).unwrap_or(schema), self.names), inner),
            },
            _ => (schema, value),
        };
        if let Value::Null = value {
            return append_null(builder, field_type);
        }
        let mismatch = || TableError::Invalid(format!("a {schema:?} value does not fit a {field_type:?} column"));
        match field_type {
            IcebergType::Primitive(P::String) => {
                let text = match (schema, value) {
                    (_, Value::String(text)) => text.clone(),
                    (_, Value::Enum(_, symbol)) => symbol.clone(),
                    _ => to_json(schema, value, self.names, 0).to_string(),
                };
                downcast::<StringBuilder>(builder)?.append_value(text);
            }
            IcebergType::Primitive(P::Boolean) => match value {
                Value::Boolean(b) => downcast::<BooleanBuilder>(builder)?.append_value(*b),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Int) => match value {
                Value::Int(v) => downcast::<Int32Builder>(builder)?.append_value(*v),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Long) => match value {
                Value::Int(v) => downcast::<Int64Builder>(builder)?.append_value(i64::from(*v)),
                Value::Long(v) => downcast::<Int64Builder>(builder)?.append_value(*v),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Float) => match value {
                Value::Float(v) => downcast::<Float32Builder>(builder)?.append_value(*v),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Double) => match value {
                Value::Float(v) => downcast::<Float64Builder>(builder)?.append_value(f64::from(*v)),
                Value::Double(v) => downcast::<Float64Builder>(builder)?.append_value(*v),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Decimal { .. }) => {
                let bytes = match value {
                    Value::Bytes(bytes) | Value::Fixed(_, bytes) => bytes,
                    _ => return Err(mismatch()),
                };
                downcast::<Decimal128Builder>(builder)?.append_value(unscaled(bytes)?);
            }
            IcebergType::Primitive(P::Date) => match value {
                Value::Int(days) => downcast::<Date32Builder>(builder)?.append_value(*days),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Time) => {
                let micros = match (schema, value) {
                    (Schema::TimeMillis, Value::Int(ms)) => i64::from(*ms) * 1_000,
                    (_, Value::Long(us)) => *us,
                    _ => return Err(mismatch()),
                };
                downcast::<Time64MicrosecondBuilder>(builder)?.append_value(micros);
            }
            IcebergType::Primitive(P::Timestamp | P::Timestamptz) => {
                let Value::Long(raw) = value else { return Err(mismatch()) };
                let micros = match schema {
                    Schema::TimestampMillis | Schema::LocalTimestampMillis => raw.saturating_mul(1_000),
                    Schema::TimestampNanos | Schema::LocalTimestampNanos => raw / 1_000,
                    _ => *raw,
                };
                downcast::<TimestampMicrosecondBuilder>(builder)?.append_value(micros);
            }
            IcebergType::Primitive(P::Binary) => match value {
                Value::Bytes(bytes) => downcast::<BinaryBuilder>(builder)?.append_value(bytes),
                _ => return Err(mismatch()),
            },
            IcebergType::Primitive(P::Fixed(_) | P::Uuid) => match value {
                Value::Fixed(_, bytes) => downcast::<FixedSizeBinaryBuilder>(builder)?
                    .append_value(bytes)
                    .map_err(|e| TableError::Invalid(e.to_string()))?,
                _ => return Err(mismatch()),
            },
            IcebergType::Struct(inner) => {
                let (Schema::Record(record), Value::Record(values)) = (schema, value) else { return Err(mismatch()) };
                self.depth += 1;
                let structs = downcast::<StructBuilder>(builder)?;
                for (index, field) in inner.fields.iter().enumerate() {
                    let child = struct_child(structs, index)?;
                    let found = record.fields.iter().zip(values).find(|(f, _)| f.name == field.name);
                    match found {
                        Some((f, (_, v))) => self.append(child, &field.field_type, &f.schema, v)?,
                        None => append_null(child, &field.field_type)?,
                    }
                }
                structs.append(true);
                self.depth -= 1;
            }
            IcebergType::List(list) => {
                let (Schema::Array(array), Value::Array(items)) = (schema, value) else { return Err(mismatch()) };
                let lists = downcast::<ListBuilder<Box<dyn ArrayBuilder>>>(builder)?;
                for item in items {
                    self.append(lists.values().as_mut(), &list.element, &array.items, item)?;
                }
                lists.append(true);
            }
            IcebergType::Map(map) => {
                let (Schema::Map(map_schema), Value::Map(entries)) = (schema, value) else { return Err(mismatch()) };
                let maps = downcast::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>(builder)?;
                let mut sorted: Vec<_> = entries.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                for (key, item) in sorted {
                    downcast::<StringBuilder>(maps.keys().as_mut())?.append_value(key);
                    self.append(maps.values().as_mut(), &map.value, &map_schema.types, item)?;
                }
                maps.append(true).map_err(|e| TableError::Invalid(e.to_string()))?;
            }
        }
        Ok(())
    }
}

/// A decimal's unscaled value: big-endian two's complement bytes.
fn unscaled(bytes: &[u8]) -> Result<i128, TableError> {
    if bytes.len() > 16 {
        return Err(TableError::Invalid(format!("a decimal of {} bytes does not fit 128 bits", bytes.len())));
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buffer = if negative { [0xff; 16] } else { [0; 16] };
    buffer[16 - bytes.len()..].copy_from_slice(bytes);
    Ok(i128::from_be_bytes(buffer))
}

/// Avro's JSON encoding of a value (unions as `{"type": value}`), for columns that hold JSON.
fn to_json(schema: &Schema, value: &Value, names: &dyn NamedTypes, depth: usize) -> serde_json::Value {
    let schema = resolve(schema, names);
    if depth > crate::avro::NESTING_MAX * 2 {
        return serde_json::Value::Null;
    }
    let latin1 = |bytes: &[u8]| serde_json::Value::String(bytes.iter().map(|b| char::from(*b)).collect());
    match (schema, value) {
        (_, Value::Null) => serde_json::Value::Null,
        (_, Value::Boolean(b)) => json!(b),
        (_, Value::Int(v)) => json!(v),
        (_, Value::Long(v)) => json!(v),
        (_, Value::Float(v)) => json!(v),
        (_, Value::Double(v)) => json!(v),
        (_, Value::String(s)) => json!(s),
        (_, Value::Bytes(bytes) | Value::Fixed(_, bytes)) => latin1(bytes),
        (_, Value::Enum(_, symbol)) => json!(symbol),
        (Schema::Union(union), Value::Union(index, inner)) => {
            let Some(branch) = union.variants().get(*index as usize) else { return serde_json::Value::Null };
            match resolve(branch, names) {
                Schema::Null => serde_json::Value::Null,
                resolved => {
                    let name = match resolved {
                        Schema::Record(r) => r.name.fullname(None),
                        Schema::Enum(e) => e.name.fullname(None),
                        Schema::Fixed(f) => f.name.fullname(None),
                        other => serde_json::to_value(other)
                            .ok()
                            .and_then(|v| {
                                v.as_str().map(str::to_owned).or_else(|| v["type"].as_str().map(str::to_owned))
                            })
                            .unwrap_or_default(),
                    };
                    json!({ name: to_json(branch, inner, names, depth + 1) })
                }
            }
        }
        (Schema::Record(record), Value::Record(values)) => serde_json::Value::Object(
            record
                .fields
                .iter()
                .zip(values)
                .map(|(field, (_, v))| (field.name.clone(), to_json(&field.schema, v, names, depth + 1)))
                .collect(),
        ),
        (Schema::Array(array), Value::Array(items)) => {
            serde_json::Value::Array(items.iter().map(|item| to_json(&array.items, item, names, depth + 1)).collect())
        }
        (Schema::Map(map), Value::Map(entries)) => serde_json::Value::Object(
            entries.iter().map(|(k, v)| (k.clone(), to_json(&map.types, v, names, depth + 1))).collect(),
        ),
        _ => serde_json::Value::Null,
    }
}
