//! Iceberg schemas: types with field ids, in the spec's JSON form, and the columns every table
//! topic starts with.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Field ids up to this one are Floe's metadata columns; value columns start after it.
pub const METADATA_FIELD_ID_MAX: i32 = 100;

/// An Iceberg primitive type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimitiveType {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Date,
    /// Microseconds since midnight.
    Time,
    /// Microseconds since the epoch, no zone.
    Timestamp,
    /// Microseconds since the epoch, UTC.
    Timestamptz,
    String,
    Uuid,
    Fixed(u32),
    Binary,
}

impl PrimitiveType {
    fn name(self) -> String {
        match self {
            Self::Boolean => "boolean".into(),
            Self::Int => "int".into(),
            Self::Long => "long".into(),
            Self::Float => "float".into(),
            Self::Double => "double".into(),
            Self::Decimal { precision, scale } => format!("decimal({precision}, {scale})"),
            Self::Date => "date".into(),
            Self::Time => "time".into(),
            Self::Timestamp => "timestamp".into(),
            Self::Timestamptz => "timestamptz".into(),
            Self::String => "string".into(),
            Self::Uuid => "uuid".into(),
            Self::Fixed(length) => format!("fixed[{length}]"),
            Self::Binary => "binary".into(),
        }
    }

    fn parse(name: &str) -> Result<Self, String> {
        let simple = match name {
            "boolean" => Some(Self::Boolean),
            "int" => Some(Self::Int),
            "long" => Some(Self::Long),
            "float" => Some(Self::Float),
            "double" => Some(Self::Double),
            "date" => Some(Self::Date),
            "time" => Some(Self::Time),
            "timestamp" => Some(Self::Timestamp),
            "timestamptz" => Some(Self::Timestamptz),
            "string" => Some(Self::String),
            "uuid" => Some(Self::Uuid),
            "binary" => Some(Self::Binary),
            _ => None,
        };
        if let Some(simple) = simple {
            return Ok(simple);
        }
        let bad = || format!("unknown Iceberg type {name:?}");
        if let Some(length) = name.strip_prefix("fixed[").and_then(|rest| rest.strip_suffix(']')) {
            return length.trim().parse().map(Self::Fixed).map_err(|_| bad());
        }
        if let Some(args) = name.strip_prefix("decimal(").and_then(|rest| rest.strip_suffix(')')) {
            let (precision, scale) = args.split_once(',').ok_or_else(bad)?;
            let precision = precision.trim().parse().map_err(|_| bad())?;
            let scale = scale.trim().parse().map_err(|_| bad())?;
            return Ok(Self::Decimal { precision, scale });
        }
        Err(bad())
    }
}

/// An Iceberg type: a primitive or a nested type whose children carry their own ids.
#[derive(Debug, Clone, PartialEq)]
pub enum IcebergType {
    Primitive(PrimitiveType),
    Struct(StructType),
    List(Box<ListType>),
    Map(Box<MapType>),
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StructType {
    pub fields: Vec<NestedField>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ListType {
    pub element_id: i32,
    pub element_required: bool,
    pub element: IcebergType,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MapType {
    pub key_id: i32,
    pub key: IcebergType,
    pub value_id: i32,
    pub value_required: bool,
    pub value: IcebergType,
}

/// A named field with its id: a column, a struct member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedField {
    pub id: i32,
    pub name: String,
    pub required: bool,
    #[serde(rename = "type")]
    pub field_type: IcebergType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

impl NestedField {
    pub fn new(id: i32, name: &str, required: bool, field_type: IcebergType) -> Self {
        Self { id, name: name.to_owned(), required, field_type, doc: None }
    }
}

/// One version of a table's schema. In JSON a struct type with its `schema-id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "struct", rename_all = "kebab-case")]
pub struct IcebergSchema {
    pub schema_id: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub identifier_field_ids: Vec<i32>,
    pub fields: Vec<NestedField>,
}

impl IcebergSchema {
    /// The highest field id anywhere in the schema (nested ids included).
    pub fn highest_field_id(&self) -> i32 {
        fn of_type(field_type: &IcebergType) -> i32 {
            match field_type {
                IcebergType::Primitive(_) => 0,
                IcebergType::Struct(inner) => inner.fields.iter().map(of_field).max().unwrap_or(0),
                IcebergType::List(list) => list.element_id.max(of_type(&list.element)),
                IcebergType::Map(map) => map.key_id.max(map.value_id).max(of_type(&map.key)).max(of_type(&map.value)),
            }
        }
        fn of_field(field: &NestedField) -> i32 {
            field.id.max(of_type(&field.field_type))
        }
        self.fields.iter().map(of_field).max().unwrap_or(0)
    }

    /// The top-level field with this id.
    pub fn field(&self, id: i32) -> Option<&NestedField> {
        self.fields.iter().find(|field| field.id == id)
    }
}

/// Field ids of the metadata columns every table topic has.
pub mod column {
    pub const PARTITION: i32 = 1;
    pub const OFFSET: i32 = 2;
    pub const TIMESTAMP: i32 = 3;
    pub const KEY: i32 = 4;
    pub const HEADERS: i32 = 5;
    pub const HEADER_ELEMENT: i32 = 6;
    pub const HEADER_KEY: i32 = 7;
    pub const HEADER_VALUE: i32 = 8;
    /// A raw table's value bytes (a topic whose values have no registry schema).
    pub const RAW_VALUE: i32 = 9;
    /// Why a dead-letter table's record could not be decoded.
    pub const ERROR: i32 = 10;
}

/// The Kafka metadata columns, in order: `_partition`, `_offset`, `_timestamp`, `_key` (required
/// when the key identifies rows, as in an upsert table) and `_headers`.
pub fn metadata_columns(key_required: bool) -> Vec<NestedField> {
    use IcebergType::Primitive as P;
    let header = StructType {
        fields: vec![
            NestedField::new(column::HEADER_KEY, "key", true, P(PrimitiveType::String)),
            NestedField::new(column::HEADER_VALUE, "value", false, P(PrimitiveType::Binary)),
        ],
    };
    vec![
        NestedField::new(column::PARTITION, "_partition", true, P(PrimitiveType::Int)),
        NestedField::new(column::OFFSET, "_offset", true, P(PrimitiveType::Long)),
        NestedField::new(column::TIMESTAMP, "_timestamp", true, P(PrimitiveType::Timestamptz)),
        NestedField::new(column::KEY, "_key", key_required, P(PrimitiveType::Binary)),
        NestedField::new(
            column::HEADERS,
            "_headers",
            false,
            IcebergType::List(Box::new(ListType {
                element_id: column::HEADER_ELEMENT,
                element_required: true,
                element: IcebergType::Struct(header),
            })),
        ),
    ]
}

// The spec writes a primitive type as its name, and a nested type as an object tagged by "type".
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum TypeJson {
    Primitive(String),
    Nested(NestedJson),
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum NestedJson {
    Struct(StructType),
    List(Box<ListType>),
    Map(Box<MapType>),
}

impl Serialize for IcebergType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let json = match self {
            Self::Primitive(primitive) => TypeJson::Primitive(primitive.name()),
            Self::Struct(inner) => TypeJson::Nested(NestedJson::Struct(inner.clone())),
            Self::List(list) => TypeJson::Nested(NestedJson::List(list.clone())),
            Self::Map(map) => TypeJson::Nested(NestedJson::Map(map.clone())),
        };
        json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for IcebergType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match TypeJson::deserialize(deserializer)? {
            TypeJson::Primitive(name) => {
                Self::Primitive(PrimitiveType::parse(&name).map_err(serde::de::Error::custom)?)
            }
            TypeJson::Nested(NestedJson::Struct(inner)) => Self::Struct(inner),
            TypeJson::Nested(NestedJson::List(list)) => Self::List(list),
            TypeJson::Nested(NestedJson::Map(map)) => Self::Map(map),
        })
    }
}

/// The schema of a raw table: the metadata columns and the value's bytes as `_value`.
pub fn raw_table_schema() -> IcebergSchema {
    let mut fields = metadata_columns(false);
    fields.push(NestedField::new(column::RAW_VALUE, "_value", false, IcebergType::Primitive(PrimitiveType::Binary)));
    IcebergSchema { schema_id: 0, identifier_field_ids: Vec::new(), fields }
}

/// The schema of a table topic's dead-letter table: the raw table's columns and `_error`, why
/// the record could not be decoded with its schema.
pub fn dead_letter_schema() -> IcebergSchema {
    let mut schema = raw_table_schema();
    schema.fields.push(NestedField::new(column::ERROR, "_error", true, IcebergType::Primitive(PrimitiveType::String)));
    schema
}

/// The schema a typed table starts with, before any record: the metadata columns only; value
/// columns come with the first writer schema ([`crate::avro::evolve`]).
pub fn typed_table_schema() -> IcebergSchema {
    IcebergSchema { schema_id: 0, identifier_field_ids: Vec::new(), fields: metadata_columns(false) }
}
