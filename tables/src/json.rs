//! JSON Schema values as table columns: an `object` schema's `properties` are the value
//! columns (any other schema is one column, `value`), matched by name.
//!
//! Types: `boolean`; `integer` as long; `number` as double; `string` (with `format: date` a
//! date); `[T, "null"]` as an optional T; an array with one `items` schema as a list; an object
//! with `properties` as a struct, or with only `additionalProperties: S` as map<string, S>.
//! Anything else (`oneOf`, `anyOf`, `allOf`, `$ref`, mixed or missing types, `const`) is text
//! holding the value's JSON. Instances are checked against their schema before they get here
//! (those that fail go to the dead-letter table), so a value that still does not fit its column
//! (a schema too loose to map) is null. An array or object whose fields would take the table
//! past [`VALUE_FIELDS_MAX`](crate::evolution::VALUE_FIELDS_MAX) is text too.

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date32Builder, Float64Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder,
    StructBuilder,
};
use serde_json::Value;

use crate::TableError;
use crate::data::{append_null, downcast, struct_child};
use crate::evolution::{FieldIds, Incompatible, NESTING_MAX, VALUE_COLUMN, VALUE_FIELD_ID_START};
use crate::schema::{IcebergSchema, IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType};

/// The one non-null type a schema names, if it names exactly one (`"T"` or `["T", "null"]`).
fn single_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(name) => Some(name),
        Value::Array(names) => {
            let mut others = names.iter().filter_map(Value::as_str).filter(|n| *n != "null");
            let first = others.next()?;
            (others.next().is_none() && names.len() <= 2).then_some(first)
        }
        _ => None,
    }
}

fn is_composite(schema: &Value) -> bool {
    ["oneOf", "anyOf", "allOf", "$ref", "not", "if", "const", "enum"].iter().any(|k| schema.get(k).is_some())
}

fn map_type(schema: &Value, path: &str, ids: &mut FieldIds, depth: usize) -> IcebergType {
    let text = IcebergType::Primitive(PrimitiveType::String);
    // Past the cap on a table's fields, an array or object is text.
    if depth > NESTING_MAX || is_composite(schema) || !ids.reserve(nested_field_count(schema)) {
        return text;
    }
    match single_type(schema) {
        Some("boolean") => IcebergType::Primitive(PrimitiveType::Boolean),
        Some("integer") => IcebergType::Primitive(PrimitiveType::Long),
        Some("number") => IcebergType::Primitive(PrimitiveType::Double),
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("date") => {
            IcebergType::Primitive(PrimitiveType::Date)
        }
        Some("array") => match schema.get("items") {
            Some(items) if items.is_object() => {
                let element_path = format!("{path}.element");
                let element_id = ids.id(&element_path);
                let element = map_type(items, &element_path, ids, depth + 1);
                IcebergType::List(Box::new(ListType { element_id, element_required: false, element }))
            }
            _ => text,
        },
        Some("object") => match (schema.get("properties"), schema.get("additionalProperties")) {
            (Some(Value::Object(properties)), _) => {
                IcebergType::Struct(StructType { fields: property_fields(properties, path, ids, depth) })
            }
            (None, Some(values)) if values.is_object() => {
                let key_id = ids.id(&format!("{path}.key"));
                let value_path = format!("{path}.value");
                let value_id = ids.id(&value_path);
                let value = map_type(values, &value_path, ids, depth + 1);
                IcebergType::Map(Box::new(MapType {
                    key_id,
                    key: IcebergType::Primitive(PrimitiveType::String),
                    value_id,
                    value_required: false,
                    value,
                }))
            }
            _ => text,
        },
        _ => text,
    }
}

/// The fields an `array` or `object` schema's column takes before anything nested deeper: a
/// list's element, a struct's properties, or a map's key and value (none when it is text).
fn nested_field_count(schema: &Value) -> usize {
    match (single_type(schema), schema.get("properties"), schema.get("additionalProperties")) {
        (Some("array"), ..) => usize::from(schema.get("items").is_some_and(Value::is_object)),
        (Some("object"), Some(Value::Object(properties)), _) => properties.len(),
        (Some("object"), None, Some(values)) if values.is_object() => 2,
        _ => 0,
    }
}

fn property_fields(
    properties: &serde_json::Map<String, Value>,
    path: &str,
    ids: &mut FieldIds,
    depth: usize,
) -> Vec<NestedField> {
    properties
        .iter()
        .map(|(name, schema)| {
            let field_path = format!("{path}.{name}");
            let id = ids.id(&field_path);
            NestedField::new(id, name, false, map_type(schema, &field_path, ids, depth + 1))
        })
        .collect()
}

/// The table schema widened to hold instances of `schema` (see [`crate::avro::evolve`]).
pub fn evolve(
    table: &IcebergSchema,
    last_column_id: i32,
    schema: &Value,
) -> Result<Option<(IcebergSchema, i32)>, Incompatible> {
    crate::evolution::evolve(table, last_column_id, |ids| match schema.get("properties") {
        Some(Value::Object(properties)) if !is_composite(schema) && single_type(schema) == Some("object") => {
            ids.take(properties.len());
            property_fields(properties, "", ids, 0)
        }
        _ => {
            ids.take(1);
            let path = format!(".{VALUE_COLUMN}");
            let id = ids.id(&path);
            vec![NestedField::new(id, VALUE_COLUMN, false, map_type(schema, &path, ids, 0))]
        }
    })
}

/// Appends one record's value columns from `instance` (`None`: a tombstone).
pub fn append_instance(
    columns: &mut [Box<dyn ArrayBuilder>],
    schema: &IcebergSchema,
    instance: Option<&Value>,
) -> Result<(), TableError> {
    let value_fields = schema.fields.iter().filter(|f| f.id >= VALUE_FIELD_ID_START);
    if value_fields.clone().count() != columns.len() {
        return Err(TableError::Invalid("value columns do not match the table schema".into()));
    }
    for (field, column) in value_fields.zip(columns.iter_mut()) {
        let value = match instance {
            Some(Value::Object(object)) => object.get(&field.name),
            Some(other) if field.name == VALUE_COLUMN => Some(other),
            _ => None,
        };
        append_json(column.as_mut(), &field.field_type, value)?;
    }
    Ok(())
}

/// Days since the epoch of `YYYY-MM-DD`.
fn parse_date(text: &str) -> Option<i32> {
    let mut parts = text.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let day: i64 = parts.next()?.parse().ok()?;
    ((1..=12).contains(&month) && (1..=31).contains(&day))
        .then(|| i32::try_from(crate::protobuf::days_from_civil(year, month, day)).ok())
        .flatten()
}

fn append_json(
    builder: &mut dyn ArrayBuilder,
    field_type: &IcebergType,
    value: Option<&Value>,
) -> Result<(), TableError> {
    use PrimitiveType as P;
    let Some(value) = value.filter(|v| !v.is_null()) else { return append_null(builder, field_type) };
    match (field_type, value) {
        (IcebergType::Primitive(P::Boolean), Value::Bool(b)) => downcast::<BooleanBuilder>(builder)?.append_value(*b),
        (IcebergType::Primitive(P::Long), Value::Number(n)) if n.as_i64().is_some() => {
            downcast::<Int64Builder>(builder)?.append_option(n.as_i64());
        }
        (IcebergType::Primitive(P::Double), Value::Number(n)) => {
            downcast::<Float64Builder>(builder)?.append_option(n.as_f64())
        }
        (IcebergType::Primitive(P::Date), Value::String(text)) => {
            downcast::<Date32Builder>(builder)?.append_option(parse_date(text));
        }
        (IcebergType::Primitive(P::String), Value::String(text)) => {
            downcast::<StringBuilder>(builder)?.append_value(text)
        }
        (IcebergType::Primitive(P::String), other) => {
            downcast::<StringBuilder>(builder)?.append_value(other.to_string())
        }
        (IcebergType::List(list), Value::Array(items)) => {
            let lists = downcast::<ListBuilder<Box<dyn ArrayBuilder>>>(builder)?;
            for item in items {
                append_json(lists.values().as_mut(), &list.element, Some(item))?;
            }
            lists.append(true);
        }
        (IcebergType::Struct(inner), Value::Object(object)) => {
            let structs = downcast::<StructBuilder>(builder)?;
            for (index, field) in inner.fields.iter().enumerate() {
                let child = struct_child(structs, index)?;
                append_json(child, &field.field_type, object.get(&field.name))?;
            }
            structs.append(true);
        }
        (IcebergType::Map(map), Value::Object(object)) => {
            let maps = downcast::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>(builder)?;
            for (key, item) in object {
                downcast::<StringBuilder>(maps.keys().as_mut())?.append_value(key);
                append_json(maps.values().as_mut(), &map.value, Some(item))?;
            }
            maps.append(true).map_err(|e| TableError::Invalid(e.to_string()))?;
        }
        // A value that does not fit its column (validation off, or a lenient schema).
        _ => append_null(builder, field_type)?,
    }
    Ok(())
}
