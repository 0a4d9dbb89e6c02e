//! Protobuf messages as table columns: a message's fields are the value columns, matched by
//! name (a renamed field is a new column).
//!
//! Types: int32, sint32, sfixed32 as int; uint32, int64, sint64, sfixed64 as long; uint64 and
//! fixed64 as decimal(20, 0), which holds every value; float, double, bool, string, bytes as
//! themselves; enums as the value's name (its number as text when unknown); messages as structs;
//! repeated fields as lists; maps as map<string, V> (keys as text). Well-known types:
//! `google.protobuf.Timestamp` as timestamptz, the wrappers (`StringValue`, …) as optional
//! scalars, `google.type.Date` as date; `Struct`, `Value`, `ListValue`, `Any`, `Duration`,
//! recursive messages, nesting past [`NESTING_MAX`] and a message whose columns would take the
//! table past [`VALUE_FIELDS_MAX`](crate::evolution::VALUE_FIELDS_MAX) as text holding the JSON
//! mapping. Proto3 fields without presence are written with their value, defaults included; a
//! message field or oneof member that is not set is null.

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder, TimestampMicrosecondBuilder,
};
pub use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage};
use prost_reflect::{FieldDescriptor, Kind, MapKey, Value};

use crate::TableError;
use crate::data::{append_null, downcast, struct_child};
use crate::evolution::{FieldIds, Incompatible, NESTING_MAX, VALUE_FIELD_ID_START};
use crate::schema::{IcebergSchema, IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType};

const TIMESTAMP: &str = "google.protobuf.Timestamp";
const DATE: &str = "google.type.Date";

/// The scalar a wrapper type (`google.protobuf.Int64Value`, …) holds.
fn wrapped(message: &MessageDescriptor) -> Option<FieldDescriptor> {
    let name = message.full_name();
    let wrapper = name.strip_prefix("google.protobuf.").is_some_and(|rest| {
        matches!(
            rest,
            "DoubleValue"
                | "FloatValue"
                | "Int64Value"
                | "UInt64Value"
                | "Int32Value"
                | "UInt32Value"
                | "BoolValue"
                | "StringValue"
                | "BytesValue"
        )
    });
    if wrapper { message.get_field(1) } else { None }
}

fn scalar_type(kind: &Kind) -> Option<PrimitiveType> {
    Some(match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => PrimitiveType::Int,
        Kind::Uint32 | Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => PrimitiveType::Long,
        Kind::Uint64 | Kind::Fixed64 => PrimitiveType::Decimal { precision: 20, scale: 0 },
        Kind::Fixed32 => PrimitiveType::Long,
        Kind::Float => PrimitiveType::Float,
        Kind::Double => PrimitiveType::Double,
        Kind::Bool => PrimitiveType::Boolean,
        Kind::String | Kind::Enum(_) => PrimitiveType::String,
        Kind::Bytes => PrimitiveType::Binary,
        Kind::Message(_) => return None,
    })
}

/// The Iceberg type of one value of `kind` (not the list a repeated field makes).
fn kind_type(kind: &Kind, path: &str, ids: &mut FieldIds, stack: &mut Vec<String>) -> IcebergType {
    let json_text = IcebergType::Primitive(PrimitiveType::String);
    if let Some(scalar) = scalar_type(kind) {
        return IcebergType::Primitive(scalar);
    }
    let Kind::Message(message) = kind else { return json_text };
    match message.full_name() {
        TIMESTAMP => return IcebergType::Primitive(PrimitiveType::Timestamptz),
        DATE => return IcebergType::Primitive(PrimitiveType::Date),
        _ => {}
    }
    if let Some(inner) = wrapped(message) {
        return kind_type(&inner.kind(), path, ids, stack);
    }
    let full = message.full_name().to_owned();
    if full.starts_with("google.protobuf.") || stack.contains(&full) || stack.len() >= NESTING_MAX {
        return json_text;
    }
    if !ids.reserve(own_field_count(message)) {
        return json_text;
    }
    stack.push(full);
    let fields = message_fields(message, path, ids, stack);
    stack.pop();
    IcebergType::Struct(StructType { fields })
}

/// The fields a message's columns take before any message nested in them: one per field, plus a
/// list's element and a map's key and value. Lists and maps are always mapped (their values are
/// appended item by item); only messages fall back to JSON text past the cap.
fn own_field_count(message: &MessageDescriptor) -> usize {
    message.fields().map(|field| 1 + usize::from(field.is_list()) + 2 * usize::from(field.is_map())).sum()
}

fn field_type(field: &FieldDescriptor, path: &str, ids: &mut FieldIds, stack: &mut Vec<String>) -> IcebergType {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else { return IcebergType::Primitive(PrimitiveType::String) };
        let key_id = ids.id(&format!("{path}.key"));
        let value_path = format!("{path}.value");
        let value_id = ids.id(&value_path);
        let value = kind_type(&entry.map_entry_value_field().kind(), &value_path, ids, stack);
        return IcebergType::Map(Box::new(MapType {
            key_id,
            key: IcebergType::Primitive(PrimitiveType::String),
            value_id,
            value_required: false,
            value,
        }));
    }
    if field.is_list() {
        let element_path = format!("{path}.element");
        let element_id = ids.id(&element_path);
        let element = kind_type(&field.kind(), &element_path, ids, stack);
        return IcebergType::List(Box::new(ListType { element_id, element_required: false, element }));
    }
    kind_type(&field.kind(), path, ids, stack)
}

fn message_fields(
    message: &MessageDescriptor,
    path: &str,
    ids: &mut FieldIds,
    stack: &mut Vec<String>,
) -> Vec<NestedField> {
    message
        .fields()
        .map(|field| {
            let field_path = format!("{path}.{}", field.name());
            let id = ids.id(&field_path);
            NestedField::new(id, field.name(), false, field_type(&field, &field_path, ids, stack))
        })
        .collect()
}

/// The table schema widened to hold messages of `message` (see [`crate::avro::evolve`]).
pub fn evolve(
    table: &IcebergSchema,
    last_column_id: i32,
    message: &MessageDescriptor,
) -> Result<Option<(IcebergSchema, i32)>, Incompatible> {
    crate::evolution::evolve(table, last_column_id, |ids| {
        ids.take(own_field_count(message));
        message_fields(message, "", ids, &mut vec![message.full_name().to_owned()])
    })
}

/// Appends one record's value columns from `message` (`None`: a tombstone) into `columns`, the
/// value column builders of a table of `schema`.
pub fn append_message(
    columns: &mut [Box<dyn ArrayBuilder>],
    schema: &IcebergSchema,
    message: Option<&DynamicMessage>,
) -> Result<(), TableError> {
    let value_fields = schema.fields.iter().filter(|f| f.id >= VALUE_FIELD_ID_START);
    if value_fields.clone().count() != columns.len() {
        return Err(TableError::Invalid("value columns do not match the table schema".into()));
    }
    for (field, column) in value_fields.zip(columns.iter_mut()) {
        append_field(column.as_mut(), field, message)?;
    }
    Ok(())
}

/// Appends field `field` (by name) of `message` to a column; null when the message has no
/// such field, or it is an unset message or oneof member.
fn append_field(
    builder: &mut dyn ArrayBuilder,
    field: &NestedField,
    message: Option<&DynamicMessage>,
) -> Result<(), TableError> {
    let Some((message, descriptor)) =
        message.and_then(|m| m.descriptor().get_field_by_name(&field.name).map(|d| (m, d)))
    else {
        return append_null(builder, &field.field_type);
    };
    let unset =
        (descriptor.supports_presence() || descriptor.containing_oneof().is_some()) && !message.has_field(&descriptor);
    if unset {
        return append_null(builder, &field.field_type);
    }
    let value = message.get_field(&descriptor);
    if descriptor.is_map() {
        let Kind::Message(entry) = descriptor.kind() else { return append_null(builder, &field.field_type) };
        let value_kind = entry.map_entry_value_field().kind();
        let (IcebergType::Map(map), Value::Map(entries)) = (&field.field_type, value.as_ref()) else {
            return append_null(builder, &field.field_type);
        };
        let maps = downcast::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>(builder)?;
        let mut sorted: Vec<_> = entries.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (key, item) in sorted {
            downcast::<StringBuilder>(maps.keys().as_mut())?.append_value(map_key_text(key));
            append_kind(maps.values().as_mut(), &map.value, &value_kind, item)?;
        }
        return maps.append(true).map_err(|e| TableError::Invalid(e.to_string()));
    }
    append_kind(builder, &field.field_type, &descriptor.kind(), value.as_ref())
}

fn map_key_text(key: &MapKey) -> String {
    match key {
        MapKey::Bool(v) => v.to_string(),
        MapKey::I32(v) => v.to_string(),
        MapKey::I64(v) => v.to_string(),
        MapKey::U32(v) => v.to_string(),
        MapKey::U64(v) => v.to_string(),
        MapKey::String(v) => v.clone(),
    }
}

/// Days since the epoch of a civil date (the proleptic Gregorian calendar).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn int_field(message: &DynamicMessage, number: u32) -> i64 {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::I32(v)) => i64::from(*v),
        Some(Value::I64(v)) => *v,
        _ => 0,
    }
}

/// Appends one value of `kind` (a list's whole value for a repeated field).
fn append_kind(
    builder: &mut dyn ArrayBuilder,
    field_type: &IcebergType,
    kind: &Kind,
    value: &Value,
) -> Result<(), TableError> {
    use PrimitiveType as P;
    let mismatch = || TableError::Invalid(format!("a {value:?} does not fit a {field_type:?} column"));
    if let (IcebergType::List(list), Value::List(items)) = (field_type, value) {
        let lists = downcast::<ListBuilder<Box<dyn ArrayBuilder>>>(builder)?;
        for item in items {
            append_kind(lists.values().as_mut(), &list.element, kind, item)?;
        }
        lists.append(true);
        return Ok(());
    }
    if let (Kind::Message(descriptor), Value::Message(message)) = (kind, value) {
        match (descriptor.full_name(), field_type) {
            (TIMESTAMP, IcebergType::Primitive(P::Timestamptz)) => {
                let micros = int_field(message, 1).saturating_mul(1_000_000) + int_field(message, 2) / 1_000;
                downcast::<TimestampMicrosecondBuilder>(builder)?.append_value(micros);
                return Ok(());
            }
            (DATE, IcebergType::Primitive(P::Date)) => {
                let days = days_from_civil(int_field(message, 1), int_field(message, 2), int_field(message, 3));
                downcast::<Date32Builder>(builder)?.append_value(i32::try_from(days).map_err(|_| mismatch())?);
                return Ok(());
            }
            (_, IcebergType::Primitive(P::String)) if scalar_type(kind).is_none() && wrapped(descriptor).is_none() => {
                let text = serde_json::to_string(message).map_err(|e| TableError::Invalid(e.to_string()))?;
                downcast::<StringBuilder>(builder)?.append_value(text);
                return Ok(());
            }
            _ => {}
        }
        if let Some(inner) = wrapped(descriptor) {
            let inner_value = message.get_field(&inner);
            return append_kind(builder, field_type, &inner.kind(), inner_value.as_ref());
        }
        let IcebergType::Struct(inner) = field_type else { return Err(mismatch()) };
        let structs = downcast::<StructBuilder>(builder)?;
        for (index, child) in inner.fields.iter().enumerate() {
            let column = struct_child(structs, index)?;
            append_field(column, child, Some(message))?;
        }
        structs.append(true);
        return Ok(());
    }
    match (field_type, value) {
        (IcebergType::Primitive(P::Int), Value::I32(v)) => downcast::<Int32Builder>(builder)?.append_value(*v),
        (IcebergType::Primitive(P::Long), Value::I32(v)) => {
            downcast::<Int64Builder>(builder)?.append_value(i64::from(*v))
        }
        (IcebergType::Primitive(P::Long), Value::I64(v)) => downcast::<Int64Builder>(builder)?.append_value(*v),
        (IcebergType::Primitive(P::Long), Value::U32(v)) => {
            downcast::<Int64Builder>(builder)?.append_value(i64::from(*v))
        }
        (IcebergType::Primitive(P::Decimal { .. }), Value::U64(v)) => {
            downcast::<Decimal128Builder>(builder)?.append_value(i128::from(*v));
        }
        (IcebergType::Primitive(P::Decimal { .. }), Value::I64(v)) => {
            downcast::<Decimal128Builder>(builder)?.append_value(i128::from(*v));
        }
        (IcebergType::Primitive(P::Float), Value::F32(v)) => downcast::<Float32Builder>(builder)?.append_value(*v),
        (IcebergType::Primitive(P::Double), Value::F32(v)) => {
            downcast::<Float64Builder>(builder)?.append_value(f64::from(*v));
        }
        (IcebergType::Primitive(P::Double), Value::F64(v)) => downcast::<Float64Builder>(builder)?.append_value(*v),
        (IcebergType::Primitive(P::Boolean), Value::Bool(v)) => downcast::<BooleanBuilder>(builder)?.append_value(*v),
        (IcebergType::Primitive(P::String), Value::String(v)) => downcast::<StringBuilder>(builder)?.append_value(v),
        (IcebergType::Primitive(P::String), Value::EnumNumber(number)) => {
            let name = match kind {
                Kind::Enum(descriptor) => descriptor.get_value(*number).map(|v| v.name().to_owned()),
                _ => None,
            };
            downcast::<StringBuilder>(builder)?.append_value(name.unwrap_or_else(|| number.to_string()));
        }
        (IcebergType::Primitive(P::Binary), Value::Bytes(v)) => downcast::<BinaryBuilder>(builder)?.append_value(v),
        _ => return Err(mismatch()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::days_from_civil;

    #[test]
    fn civil_dates_count_days_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }
}
