//! Keys and values sent over HTTP as JSON with a registry schema (REST v3's `schema_id`,
//! `schema_version`, `subject`, `subject_name_strategy` and `schema`, or a type of `AVRO`,
//! `PROTOBUF` or `JSONSCHEMA`): written as Confluent's serializers write them (magic byte 0,
//! the schema id, then the payload), so a device needs no client library and a consumer with
//! the stock deserializer reads them.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use floe_agent::Agent;
use floe_agent::access::Access;
pub(crate) use floe_agent::produce::schemas::SubjectNameStrategy;
use floe_metadata::acl::AclOperation;
use floe_metadata::{SchemaRegistry, SchemaType, State};
use floe_registry::ParsedSchema;

use super::RecordError;
use super::json::{DataReport, DataType, ParsedRecord};
use crate::routes::schema_registry::{may_read_schema, may_subject};

/// A key or value to be written with a schema, as the record gave it.
#[derive(Debug)]
pub(crate) struct SchemaData {
    /// `AVRO`, `PROTOBUF` or `JSONSCHEMA` when the record names one: the schema must be of it.
    pub(crate) data_type: Option<DataType>,
    pub(crate) data: serde_json::Value,
    pub(crate) schema_id: Option<i32>,
    pub(crate) schema_version: Option<i32>,
    pub(crate) subject: Option<String>,
    pub(crate) strategy: Option<SubjectNameStrategy>,
    /// A schema's text, registered under the subject unless it is there already.
    pub(crate) schema: Option<String>,
    /// The Protobuf message to write, by full name (Floe's; the first message when absent).
    pub(crate) message_name: Option<String>,
}

/// The schema type a REST v3 data type names, if it names one.
pub(crate) fn schema_type_of(data_type: DataType) -> Option<SchemaType> {
    match data_type {
        DataType::Avro => Some(SchemaType::Avro),
        DataType::Protobuf => Some(SchemaType::Protobuf),
        DataType::Jsonschema => Some(SchemaType::Json),
        DataType::Binary | DataType::Json | DataType::String => None,
    }
}

pub(crate) fn data_type_of(schema_type: SchemaType) -> DataType {
    match schema_type {
        SchemaType::Avro => DataType::Avro,
        SchemaType::Protobuf => DataType::Protobuf,
        SchemaType::Json => DataType::Jsonschema,
    }
}

/// Where a key's or value's schema was found.
struct Found {
    id: i32,
    schema_type: SchemaType,
    schema: Arc<ParsedSchema>,
    subject: Option<String>,
    version: Option<i32>,
}

/// Why a schema was not found: `Missing` may be this agent's mirror lagging behind a
/// registration made through another agent a moment ago.
enum NotFound {
    Missing(String),
    Refused(String),
}

/// The schema a record's key or value names, in `registry` (namespace `ns`) as this mirror
/// holds it. A `schema` text not yet under its subject comes back as `Register`.
enum Resolution {
    Found(Found),
    Register { subject: String, schema_type: SchemaType },
}

/// Schemas given as text in a request, parsed once each (outside the mirror's lock), by type
/// and text.
type TextSchemas = HashMap<(SchemaType, String), Result<Arc<ParsedSchema>, String>>;

struct Resolver<'a> {
    agent: &'a Agent,
    texts: &'a TextSchemas,
    /// Schema ids found readable by the caller, or not, in this request.
    readable: std::cell::RefCell<HashMap<i32, bool>>,
    ns: &'a str,
    /// The topic's name as its clients know it (without the tenant's prefix).
    topic: &'a str,
    /// The caller's ACLs (none without `--authorizer`): it must be allowed to read the schemas
    /// it names and to register the ones it gives, as with the registry's API.
    access: Option<&'a Access>,
}

impl Resolver<'_> {
    fn may(&self, state: &State, operation: AclOperation, subject: &str) -> Result<(), NotFound> {
        if may_subject(state, self.access, operation, subject) {
            Ok(())
        } else {
            Err(NotFound::Refused(format!("not authorized: {operation:?} on subject {subject:?}")))
        }
    }

    fn resolve(&self, state: &State, data: &SchemaData, is_key: bool) -> Result<Resolution, NotFound> {
        let empty = SchemaRegistry::default();
        let registry = state.schema_registry(self.ns).unwrap_or(&empty);
        let wanted_type = data.data_type.and_then(schema_type_of);
        // `checked`: whether the caller must be allowed to read the schema.
        let parsed_as = |id: i32, checked: bool| -> Result<Arc<ParsedSchema>, NotFound> {
            if !registry.schemas.contains_key(&id) {
                return Err(NotFound::Missing(format!("schema {id} not found")));
            }
            let readable = || {
                *self
                    .readable
                    .borrow_mut()
                    .entry(id)
                    .or_insert_with(|| may_read_schema(state, self.access, registry, id))
            };
            if checked && !readable() {
                return Err(NotFound::Refused(format!("not authorized to read schema {id}")));
            }
            self.agent.parsed_schemas.get(self.ns, id, registry).map_err(NotFound::Refused)
        };
        let parsed = |id: i32| parsed_as(id, true);
        let text_schema = match &data.schema {
            Some(text) => {
                let schema_type = wanted_type.unwrap_or(SchemaType::Avro);
                match self.texts.get(&(schema_type, text.clone())) {
                    Some(Ok(schema)) => Some((schema_type, schema.clone())),
                    Some(Err(why)) => return Err(NotFound::Refused(format!("schema: {why}"))),
                    None => return Err(NotFound::Refused("schema: not parsed".into())),
                }
            }
            None => None,
        };
        let by_id = match data.schema_id {
            Some(id) => Some((id, parsed(id)?)),
            None => None,
        };
        let record_name = || {
            if let Some(name) = &data.message_name {
                // Checked before the name picks a subject a schema's text may be registered under.
                let given = text_schema.as_ref().map(|(_, s)| s).or(by_id.as_ref().map(|(_, s)| s));
                if given.is_some_and(|s| !s.has_message(name)) {
                    return Err(NotFound::Refused(format!(
                        "message_name: the schema has no Protobuf message {name:?}"
                    )));
                }
                return Ok(name.clone());
            }
            let name = match (&text_schema, &by_id) {
                (Some((_, schema)), _) => schema.record_name(&[0]),
                (None, Some((_, schema))) => schema.record_name(&[0]),
                (None, None) => None,
            };
            name.ok_or_else(|| {
                NotFound::Refused(
                    "subject_name_strategy RECORD_NAME and TOPIC_RECORD_NAME need schema_id or schema naming a record"
                        .into(),
                )
            })
        };
        let subject = match &data.subject {
            Some(subject) => subject.clone(),
            None => data.strategy.unwrap_or_default().subject(self.topic, is_key, record_name)?,
        };
        let (id, schema) = match (by_id, text_schema) {
            (Some(found), _) => found,
            (None, Some((schema_type, schema))) => {
                let content = floe_metadata::SchemaContent {
                    schema_type,
                    text: schema.canonical().to_owned(),
                    references: Vec::new(),
                };
                match registry.id_of(&content).filter(|id| registry.version_of(&subject, *id, false).is_some()) {
                    // The caller sent the schema itself: Write on the subject is enough, as
                    // registering it again would answer this id.
                    Some(id) => {
                        let may_write = may_subject(state, self.access, AclOperation::Write, &subject);
                        (id, parsed_as(id, !may_write)?)
                    }
                    None => {
                        self.may(state, AclOperation::Write, &subject)?;
                        return Ok(Resolution::Register { subject, schema_type });
                    }
                }
            }
            (None, None) => {
                self.may(state, AclOperation::Read, &subject)?;
                let versions = registry.subjects.get(&subject);
                let version = match data.schema_version {
                    Some(v) => versions.and_then(|s| s.versions.get(&v)).filter(|v| !v.deleted),
                    None => versions.and_then(|s| s.latest_live()).map(|(_, v)| v),
                };
                let Some(version) = version else {
                    return Err(NotFound::Missing(match data.schema_version {
                        Some(v) => format!("subject {subject:?} has no version {v}"),
                        None => format!("subject {subject:?} has no schema"),
                    }));
                };
                (version.id, parsed(version.id)?)
            }
        };
        let schema_type = registry.schemas.get(&id).map_or(SchemaType::Avro, |s| s.content.schema_type);
        if let Some(wanted) = wanted_type.filter(|w| *w != schema_type) {
            return Err(NotFound::Refused(format!("type {} but schema {id} is {}", wanted.name(), schema_type.name())));
        }
        let version = registry.version_of(&subject, id, false);
        Ok(Resolution::Found(Found { id, schema_type, schema, subject: version.map(|_| subject), version }))
    }
}

/// Writes `data` as the registry's framing and `found`'s payload.
fn serialize(data: &SchemaData, found: &Found) -> Result<(Option<Bytes>, DataReport), String> {
    let report = |size| DataReport {
        data_type: data_type_of(found.schema_type),
        size,
        schema_id: Some(found.id),
        subject: found.subject.clone(),
        schema_version: found.version,
    };
    if data.data.is_null() {
        return Ok((None, report(0)));
    }
    let payload = found.schema.encode_json(&data.data, data.message_name.as_deref())?;
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.put_u8(0);
    out.put_i32(found.id);
    out.put_slice(&payload);
    Ok((Some(out.freeze()), report(5 + payload.len())))
}

/// Resolves and writes every key and value of `records` sent with a schema, in place; a record
/// whose schema cannot be found or whose data does not fit it becomes a 422 naming why. Schemas
/// given as text are registered (each distinct one once), and a schema this agent's mirror does
/// not hold is looked for once more after catching the mirror up, since it may have been
/// registered through another agent a moment ago.
pub(crate) async fn write_schema_data(
    agent: &Arc<Agent>,
    stored_topic: &str,
    access: Option<&Access>,
    records: &mut [Result<ParsedRecord, RecordError>],
) {
    let needs = |r: &Result<ParsedRecord, RecordError>| {
        r.as_ref().is_ok_and(|p| p.key_schema.is_some() || p.value_schema.is_some())
    };
    if !records.iter().any(needs) {
        return;
    }
    let ns = floe_metadata::namespace::key_of(stored_topic).unwrap_or("");
    let topic = stored_topic.split_once(floe_metadata::namespace::SEPARATOR).map_or(stored_topic, |(_, n)| n);
    let mut texts = TextSchemas::new();
    for record in records.iter().flatten() {
        for data in [&record.key_schema, &record.value_schema].into_iter().flatten() {
            let Some(text) = &data.schema else { continue };
            let schema_type = data.data_type.and_then(schema_type_of).unwrap_or(SchemaType::Avro);
            texts.entry((schema_type, text.clone())).or_insert_with(|| {
                if text.len() > floe_metadata::limits::SCHEMA_TEXT_BYTES_MAX {
                    return Err(format!("over {} bytes", floe_metadata::limits::SCHEMA_TEXT_BYTES_MAX));
                }
                let format = floe_agent::produce::schemas::format_of(schema_type);
                ParsedSchema::parse(format, text, &[]).map(Arc::new).map_err(|e| e.to_string())
            });
        }
    }
    let resolver = Resolver { agent, texts: &texts, readable: Default::default(), ns, topic, access };
    let mut registered: HashMap<(String, String), Result<(), String>> = HashMap::new();
    for last_round in [false, true] {
        let mut missing = false;
        let mut to_register: Vec<(String, SchemaType, String)> = Vec::new();
        for record in records.iter_mut() {
            let Ok(parsed) = record else { continue };
            for is_key in [true, false] {
                let slot = if is_key { &mut parsed.key_schema } else { &mut parsed.value_schema };
                let Some(data) = slot.as_ref() else { continue };
                let resolution = resolver.resolve(&agent.metadata.read(), data, is_key);
                let outcome = match resolution {
                    Ok(Resolution::Found(found)) => serialize(data, &found),
                    Ok(Resolution::Register { subject, schema_type }) => {
                        let text = data.schema.clone().unwrap_or_default();
                        match registered.get(&(subject.clone(), text.clone())) {
                            Some(Err(why)) => Err(format!("registering the schema under {subject:?}: {why}")),
                            _ if last_round => Err("the registered schema is not visible on this agent yet".into()),
                            _ => {
                                to_register.push((subject, schema_type, text));
                                continue;
                            }
                        }
                    }
                    Err(NotFound::Missing(_)) if !last_round => {
                        missing = true;
                        continue;
                    }
                    Err(NotFound::Missing(why) | NotFound::Refused(why)) => Err(why),
                };
                *slot = None;
                let what = if is_key { "key" } else { "value" };
                match outcome {
                    Ok((bytes, report)) if is_key => (parsed.record.key, parsed.key_report) = (bytes, Some(report)),
                    Ok((bytes, report)) => (parsed.record.value, parsed.value_report) = (bytes, Some(report)),
                    Err(why) => {
                        *record = Err(RecordError::invalid(format!("{what}: {why}")));
                        break;
                    }
                }
            }
        }
        if to_register.is_empty() && !missing {
            return;
        }
        for (subject, schema_type, text) in to_register {
            if let Entry::Vacant(slot) = registered.entry((subject, text)) {
                let (subject, text) = slot.key();
                let outcome =
                    crate::routes::schema_registry::register_for_produce(agent, ns, subject, schema_type, text).await;
                slot.insert(outcome.map(drop));
            }
        }
        if missing && agent.parsed_schemas.may_catch_up(floe_metadata::now_ms()) {
            // Not caught up: the last round refuses what is still missing.
            let _ = agent.metadata.catch_up().await;
        }
    }
}
