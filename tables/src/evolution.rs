//! How a table's schema grows to hold a new writer schema, whatever its language: the writer's
//! columns get the table's ids where their name paths match and new ids after the highest ever
//! used; then the two are merged under Iceberg's evolution rules.

use std::collections::HashMap;

use crate::schema::{IcebergSchema, IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType};

/// The first id of value columns; lower ids are Floe's metadata columns.
pub const VALUE_FIELD_ID_START: i32 = crate::schema::METADATA_FIELD_ID_MAX + 1;
/// Nesting of records, messages, arrays and maps mapped to nested types; deeper is JSON text.
pub const NESTING_MAX: usize = 32;
/// Value fields one table may have: its value columns and every field nested in them, a list's
/// element and a map's key and value included (everything with a field id). Types shared by
/// several fields expand into a tree, one copy per path: a record with two fields of the next
/// record, 13 deep, is 24,574 fields, 30 deep a billion. Each is an Arrow builder the table job
/// holds and a column chunk in every row group's footer, and a table this wide is no longer a
/// table anyone queries.
///
/// A writer schema's fields are given out depth first in field order, and a nested record,
/// message, list or map whose own fields no longer fit is JSON text instead, as recursion is: no
/// data is lost, and mapping stops as soon as the cap is reached. Top-level columns have no such
/// fallback, and a table whose writers between them need more fields than the cap is refused
/// ([`Incompatible::TooManyFields`]). A table that has more already (made before the cap) keeps
/// them but does not grow.
pub const VALUE_FIELDS_MAX: usize = 10_000;
/// The column of a value that is not a record.
pub(crate) const VALUE_COLUMN: &str = "value";

/// Ids for fields by their path, reusing the table's and handing out new ones after the
/// highest ever used; and how many more fields the writer's mapping may give
/// ([`VALUE_FIELDS_MAX`]).
pub(crate) struct FieldIds {
    known: HashMap<String, i32>,
    last: i32,
    fields_left: usize,
}

impl FieldIds {
    fn new(schema: &IcebergSchema, last_column_id: i32) -> Self {
        let mut known = HashMap::new();
        fn walk(known: &mut HashMap<String, i32>, path: &str, field_type: &IcebergType) {
            match field_type {
                IcebergType::Primitive(_) => {}
                IcebergType::Struct(inner) => {
                    for field in &inner.fields {
                        let path = format!("{path}.{}", field.name);
                        known.insert(path.clone(), field.id);
                        walk(known, &path, &field.field_type);
                    }
                }
                IcebergType::List(list) => {
                    known.insert(format!("{path}.element"), list.element_id);
                    walk(known, &format!("{path}.element"), &list.element);
                }
                IcebergType::Map(map) => {
                    known.insert(format!("{path}.key"), map.key_id);
                    known.insert(format!("{path}.value"), map.value_id);
                    walk(known, &format!("{path}.value"), &map.value);
                }
            }
        }
        walk(&mut known, "", &IcebergType::Struct(StructType { fields: schema.fields.clone() }));
        let fields_max = VALUE_FIELDS_MAX.max(field_count(value_fields(&schema.fields)));
        Self { known, last: last_column_id.max(VALUE_FIELD_ID_START - 1), fields_left: fields_max }
    }

    /// Takes `count` fields from what the writer's mapping may still give, if that many are
    /// left: a nested type is mapped only when its own fields fit, else it is JSON text.
    pub(crate) fn reserve(&mut self, count: usize) -> bool {
        match self.fields_left.checked_sub(count) {
            Some(left) => {
                self.fields_left = left;
                true
            }
            None => false,
        }
    }

    /// Takes `count` fields whether or not they fit: top-level columns, which cannot be JSON
    /// text in their parent's place (the merged table is checked against the cap instead).
    pub(crate) fn take(&mut self, count: usize) {
        self.fields_left = self.fields_left.saturating_sub(count);
    }

    pub(crate) fn id(&mut self, path: &str) -> i32 {
        if let Some(id) = self.known.get(path) {
            return *id;
        }
        self.last += 1;
        self.known.insert(path.to_owned(), self.last);
        self.last
    }
}

/// Why a writer schema cannot be a version of the table's schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    #[error("field {path} cannot change from {from} to {to}")]
    TypeChanged { path: String, from: String, to: String },
    #[error("the table would have {count} value fields (nested ones included), more than {VALUE_FIELDS_MAX}")]
    TooManyFields { count: usize },
}

/// A table's value columns: those past Floe's metadata columns.
pub(crate) fn value_fields(fields: &[NestedField]) -> impl Iterator<Item = &NestedField> {
    fields.iter().filter(|field| field.id >= VALUE_FIELD_ID_START)
}

/// Fields with an id in `fields` and nested in them ([`VALUE_FIELDS_MAX`] counts these).
pub(crate) fn field_count<'a>(fields: impl IntoIterator<Item = &'a NestedField>) -> usize {
    fn nested(field_type: &IcebergType) -> usize {
        match field_type {
            IcebergType::Primitive(_) => 0,
            IcebergType::Struct(inner) => field_count(&inner.fields),
            IcebergType::List(list) => 1 + nested(&list.element),
            IcebergType::Map(map) => 2 + nested(&map.value),
        }
    }
    fields.into_iter().map(|field| 1 + nested(&field.field_type)).sum()
}

/// `current` widened to hold `writer` too, if that is a legal Iceberg evolution: same types, or
/// int to long, float to double, a decimal's precision growing at the same scale.
fn merge_type(current: &IcebergType, writer: &IcebergType, path: &str) -> Result<IcebergType, Incompatible> {
    use PrimitiveType as P;
    let incompatible = || Incompatible::TypeChanged {
        path: path.to_owned(),
        from: serde_json::to_string(current).unwrap_or_default(),
        to: serde_json::to_string(writer).unwrap_or_default(),
    };
    Ok(match (current, writer) {
        (IcebergType::Primitive(a), IcebergType::Primitive(b)) if a == b => current.clone(),
        (IcebergType::Primitive(P::Int), IcebergType::Primitive(P::Long)) => writer.clone(),
        (IcebergType::Primitive(P::Long), IcebergType::Primitive(P::Int)) => current.clone(),
        (IcebergType::Primitive(P::Float), IcebergType::Primitive(P::Double)) => writer.clone(),
        (IcebergType::Primitive(P::Double), IcebergType::Primitive(P::Float)) => current.clone(),
        (
            IcebergType::Primitive(P::Decimal { precision: p1, scale: s1 }),
            IcebergType::Primitive(P::Decimal { precision: p2, scale: s2 }),
        ) if s1 == s2 => IcebergType::Primitive(P::Decimal { precision: (*p1).max(*p2), scale: *s1 }),
        (IcebergType::Struct(a), IcebergType::Struct(b)) => {
            IcebergType::Struct(StructType { fields: merge_fields(&a.fields, &b.fields, path)? })
        }
        (IcebergType::List(a), IcebergType::List(b)) => IcebergType::List(Box::new(ListType {
            element: merge_type(&a.element, &b.element, &format!("{path}.element"))?,
            ..(**a).clone()
        })),
        (IcebergType::Map(a), IcebergType::Map(b)) => IcebergType::Map(Box::new(MapType {
            value: merge_type(&a.value, &b.value, &format!("{path}.value"))?,
            ..(**a).clone()
        })),
        _ => return Err(incompatible()),
    })
}

fn merge_fields(current: &[NestedField], writer: &[NestedField], path: &str) -> Result<Vec<NestedField>, Incompatible> {
    let mut merged = current.to_vec();
    // By name: a struct may have thousands of fields.
    let mut positions: HashMap<String, usize> =
        merged.iter().enumerate().rev().map(|(i, field)| (field.name.clone(), i)).collect();
    for field in writer {
        let field_path = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
        match positions.get(&field.name) {
            Some(&i) => merged[i].field_type = merge_type(&merged[i].field_type, &field.field_type, &field_path)?,
            None => {
                positions.insert(field.name.clone(), merged.len());
                merged.push(field.clone());
            }
        }
    }
    Ok(merged)
}

/// The table schema widened to hold the columns `writer_columns` builds (with ids from the
/// table's), and the new `last-column-id`; `None` when nothing changes.
pub(crate) fn evolve(
    table: &IcebergSchema,
    last_column_id: i32,
    writer_columns: impl FnOnce(&mut FieldIds) -> Vec<NestedField>,
) -> Result<Option<(IcebergSchema, i32)>, Incompatible> {
    let mut ids = FieldIds::new(table, last_column_id);
    let columns = writer_columns(&mut ids);
    let (metadata, values): (Vec<NestedField>, Vec<NestedField>) =
        table.fields.iter().cloned().partition(|field| field.id < VALUE_FIELD_ID_START);
    if let Some(clash) = columns.iter().find(|c| metadata.iter().any(|m| m.name == c.name)) {
        return Err(Incompatible::TypeChanged {
            path: clash.name.clone(),
            from: "a Floe metadata column".into(),
            to: "a field".into(),
        });
    }
    let merged = merge_fields(&values, &columns, "")?;
    if merged == values {
        return Ok(None);
    }
    let count = field_count(&merged);
    if count > VALUE_FIELDS_MAX.max(field_count(&values)) {
        return Err(Incompatible::TooManyFields { count });
    }
    let mut fields = metadata;
    fields.extend(merged);
    let schema = IcebergSchema {
        schema_id: table.schema_id + 1,
        identifier_field_ids: table.identifier_field_ids.clone(),
        fields,
    };
    let last = schema.highest_field_id().max(last_column_id);
    Ok(Some((schema, last)))
}
