//! Broker-side schema validation, as Confluent Server's topic configs
//! `confluent.key.schema.validation` and `confluent.value.schema.validation` ask for: each
//! non-null key or value must start with the registry's framing (magic byte 0, a 4-byte schema
//! id) naming a schema registered in the topic's tenant's registry as a live version of the
//! subject the topic's subject name strategy gives. With `floe.schema.validation.mode=full`
//! the payload after the framing must also be valid for that schema: one Avro datum, or a JSON
//! document the JSON Schema accepts, or message indexes and a message of the Protobuf schema.
//!
//! Only topics with validation on pay for it: their batches are decompressed (with the same
//! bound as the compacted-topic key check) and parsed schemas are kept in [`ParsedSchemas`].

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use floe_metadata::locks::MutexRecovery;
use floe_metadata::{SchemaReference, SchemaRegistry, SchemaType, State, Topic};
use floe_registry::{ParsedSchema, SchemaFormat};

use crate::record_batch::records::{self, Header, RecordRef};

/// How the subject a record's schema must belong to is named (Confluent's
/// `*.subject.name.strategy`; over HTTP, REST v3's `subject_name_strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub enum SubjectNameStrategy {
    /// `{topic}-key` or `{topic}-value`.
    #[default]
    #[serde(rename = "TOPIC_NAME")]
    TopicName,
    /// The full name of the schema's record.
    #[serde(rename = "RECORD_NAME")]
    RecordName,
    /// `{topic}-{record full name}`.
    #[serde(rename = "TOPIC_RECORD_NAME")]
    TopicRecordName,
}

impl SubjectNameStrategy {
    /// The subject of a key (`is_key`) or value of `topic`; `record_name` gives the schema's
    /// record name when the strategy needs it.
    pub fn subject<E>(
        self,
        topic: &str,
        is_key: bool,
        record_name: impl FnOnce() -> Result<String, E>,
    ) -> Result<String, E> {
        Ok(match self {
            Self::TopicName => format!("{topic}-{}", if is_key { "key" } else { "value" }),
            Self::RecordName => record_name()?,
            Self::TopicRecordName => format!("{topic}-{}", record_name()?),
        })
    }

    /// From a config value: the short name or Confluent's class name. Unknown values cannot be
    /// stored (the config catalog refuses them), so they read as the default.
    fn from_config(value: Option<&str>) -> Self {
        match value.map(|v| v.rsplit('.').next().unwrap_or(v)) {
            Some("RecordNameStrategy") => Self::RecordName,
            Some("TopicRecordNameStrategy") => Self::TopicRecordName,
            _ => Self::TopicName,
        }
    }
}

/// A topic's schema validation settings; absent when neither keys nor values are validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemaValidation {
    pub key: Option<SubjectNameStrategy>,
    pub value: Option<SubjectNameStrategy>,
    /// `floe.schema.validation.mode=full`: the payload is decoded against the schema too.
    pub full: bool,
}

impl SchemaValidation {
    pub fn for_topic(state: &State, topic: &Topic) -> Option<Self> {
        let value = |name: &str| state.topic_config_value(topic, name);
        let on = |name: &str| value(name) == Some("true");
        let strategy = |name: &str| SubjectNameStrategy::from_config(value(name));
        let key = on("confluent.key.schema.validation").then(|| strategy("confluent.key.subject.name.strategy"));
        let val = on("confluent.value.schema.validation").then(|| strategy("confluent.value.subject.name.strategy"));
        (key.is_some() || val.is_some()).then(|| Self {
            key,
            value: val,
            full: value("floe.schema.validation.mode") == Some("full"),
        })
    }
}

/// The schema validation of one partition's records in one request.
#[derive(Debug)]
pub struct SchemaCheck<'a> {
    registry: Option<&'a SchemaRegistry>,
    namespace: &'a str,
    /// The topic's name as its clients know it (without the tenant's prefix).
    topic: &'a str,
    validation: SchemaValidation,
    parsed: &'a ParsedSchemas,
    /// Set when a record named an id or a subject version this mirror does not hold: it may
    /// have been registered through another agent a moment ago, so the caller catches the
    /// mirror up and checks again before refusing.
    missing: Cell<bool>,
    /// (key or value, id) pairs found registered under their subject in this request, and
    /// schemas parsed for it: a batch's records mostly share one id, so each is looked up once.
    verified: RefCell<Vec<(bool, i32)>>,
    parsed_here: RefCell<Vec<(i32, Arc<ParsedSchema>)>>,
}

/// Distinct ids one [`SchemaCheck`] remembers; records naming more are looked up each time.
const REMEMBERED_IDS_MAX: usize = 16;

impl<'a> SchemaCheck<'a> {
    /// For the topic stored as `stored_topic`.
    pub fn new(
        state: &'a State,
        stored_topic: &'a str,
        validation: SchemaValidation,
        parsed: &'a ParsedSchemas,
    ) -> Self {
        let namespace = floe_metadata::namespace::key_of(stored_topic).unwrap_or("");
        let name = stored_topic.split_once(floe_metadata::namespace::SEPARATOR).map_or(stored_topic, |(_, n)| n);
        Self {
            registry: state.schema_registry(namespace),
            namespace,
            topic: name,
            validation,
            parsed,
            missing: Cell::new(false),
            verified: RefCell::default(),
            parsed_here: RefCell::default(),
        }
    }

    /// Whether a refusal may be only this mirror lagging (see the field).
    pub fn saw_missing(&self) -> bool {
        self.missing.get()
    }

    /// Why `record` is refused, if it is.
    pub fn refusal(&self, record: &RecordRef<'_>) -> Option<String> {
        let header = |name: &[u8]| records::header(record.headers, name);
        self.refusal_of(record.key, record.value, header)
    }

    /// Why a record with this key and value is refused, if it is; `header` finds a record
    /// header by name (the schema id headers are looked for).
    pub fn refusal_of<'r>(
        &self,
        key: Option<&'r [u8]>,
        value: Option<&'r [u8]>,
        header: impl Fn(&[u8]) -> Header<'r>,
    ) -> Option<String> {
        if let Some(strategy) = self.validation.key
            && let Some(why) = self.part("key", key, KEY_SCHEMA_ID_HEADER, &header, strategy)
        {
            return Some(why);
        }
        let strategy = self.validation.value?;
        self.part("value", value, VALUE_SCHEMA_ID_HEADER, &header, strategy)
    }

    fn part<'r>(
        &self,
        what: &str,
        bytes: Option<&'r [u8]>,
        header_name: &[u8],
        header: &impl Fn(&[u8]) -> Header<'r>,
        strategy: SubjectNameStrategy,
    ) -> Option<String> {
        // A null key or value (a tombstone) carries no schema.
        let bytes = bytes?;
        let name = String::from_utf8_lossy(header_name);
        let header = match header(header_name) {
            Header::Absent => None,
            Header::One(Some(value)) => Some(value),
            Header::One(None) => return Some(format!("the record's {name} header is null")),
            Header::Repeated => {
                return Some(format!("the record has more than one {name} header (clients differ on which counts)"));
            }
        };
        let Some(framed) = framed(bytes, header) else {
            return Some(match header {
                None => format!(
                    "the record's {what} does not start with the schema registry's framing (magic byte 0 and a 4-byte schema id)"
                ),
                Some(_) => format!(
                    "the record's {what} schema header is not the registry's framing (magic byte 1 and a GUID, or 0 and an id)"
                ),
            });
        };
        let id = match framed.schema {
            SchemaName::Id(id) => id,
            SchemaName::Guid(guid) => match schema_id_of_guid(self.namespace, guid) {
                Some(id) => id,
                None => return Some(format!("the record's {what} names schema GUID {guid}, which is not registered")),
            },
        };
        // With the schema in a header, Protobuf message indexes are there too; a record name
        // is read from them alone.
        let payload = &framed;
        let indexes = match framed.header_indexes {
            Some(indexes) if self.is_protobuf(id) => indexes,
            _ => framed.payload,
        };
        let is_key = what == "key";
        // Most records of a request name an id already checked: no map lookups for them.
        if self.verified.borrow().contains(&(is_key, id)) {
            return self.check_payload(what, id, payload, || self.parsed_schema(id));
        }
        if self.registry.and_then(|r| r.schemas.get(&id)).is_none() {
            // Only an id above the last one this mirror knows may be a registration it has not
            // applied yet; a lower one was deleted (or never given), and waiting changes nothing.
            if id > self.registry.map_or(0, |r| r.last_id) {
                self.missing.set(true);
            }
            return Some(format!("the record's {what} names schema id {id}, which is not registered"));
        }
        let registry = self.registry?;
        let parsed = || self.parsed_schema(id);
        let record_name = || -> Result<String, String> {
            parsed()?.record_name(indexes).ok_or_else(|| {
                format!(
                    "schema id {id} names no record (an Avro named type, a JSON Schema's title, a Protobuf message)"
                )
            })
        };
        // The subject depends on the payload only through a Protobuf record name (its message
        // indexes); otherwise an id checked once holds for the request's other records.
        let protobuf = self.is_protobuf(id);
        let memo = strategy == SubjectNameStrategy::TopicName || !protobuf;
        let subject = match strategy.subject(self.topic, is_key, record_name) {
            Ok(subject) => subject,
            Err(why) => return Some(why),
        };
        let registered =
            registry.subjects.get(&subject).is_some_and(|s| s.live_versions().any(|(_, version)| version.id == id));
        if !registered {
            self.missing.set(true);
            return Some(format!("schema id {id} of the record's {what} is not a version of subject {subject:?}"));
        }
        let mut verified = self.verified.borrow_mut();
        if memo && verified.len() < REMEMBERED_IDS_MAX {
            verified.push((is_key, id));
        }
        drop(verified);
        self.check_payload(what, id, payload, parsed)
    }

    fn is_protobuf(&self, id: i32) -> bool {
        self.registry.and_then(|r| r.schemas.get(&id)).is_some_and(|s| s.content.schema_type == SchemaType::Protobuf)
    }

    /// Schema `id`, parsed once per request (and cached across requests in [`ParsedSchemas`]).
    fn parsed_schema(&self, id: i32) -> Result<Arc<ParsedSchema>, String> {
        if let Some((_, hit)) = self.parsed_here.borrow().iter().find(|(known, _)| *known == id) {
            return Ok(hit.clone());
        }
        let registry = self.registry.ok_or_else(|| format!("schema id {id} is not registered"))?;
        let parsed = self.parsed.get(self.namespace, id, registry).map_err(|e| format!("schema id {id}: {e}"))?;
        let mut here = self.parsed_here.borrow_mut();
        if here.len() < REMEMBERED_IDS_MAX {
            here.push((id, parsed.clone()));
        }
        Ok(parsed)
    }

    /// In `full` mode, why the payload does not match its schema, if it does not.
    fn check_payload(
        &self,
        what: &str,
        id: i32,
        framed: &Framed<'_>,
        parsed: impl Fn() -> Result<Arc<ParsedSchema>, String>,
    ) -> Option<String> {
        if !self.validation.full {
            return None;
        }
        let joined: Vec<u8>;
        let payload = match framed.header_indexes {
            Some(indexes) if self.is_protobuf(id) => {
                joined = [indexes, framed.payload].concat();
                joined.as_slice()
            }
            _ => framed.payload,
        };
        match parsed() {
            Ok(parsed) => parsed
                .check_payload(payload)
                .err()
                .map(|why| format!("the record's {what} does not match schema id {id}: {why}")),
            Err(why) => Some(why),
        }
    }
}

/// Header names Confluent's serializers put a key's or value's schema in, with magic byte 1 and
/// the schema's GUID (their `header_schema_id_serializer`), the payload then left unframed.
pub const KEY_SCHEMA_ID_HEADER: &[u8] = b"__key_schema_id";
pub const VALUE_SCHEMA_ID_HEADER: &[u8] = b"__value_schema_id";

/// A schema's GUID (Confluent's `guid`): derived from the registry's namespace and the id,
/// not stored. Namespace keys are never reused, so a GUID names what its id names (which
/// IMPORT mode may give to new content once the id is hard-deleted, as with the id itself);
/// the id sits in the last four bytes behind a checksum of the namespace, so a GUID maps back
/// to its id without an index, and one of another namespace maps to nothing.
pub fn schema_guid(namespace: &str, id: i32) -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&crc32c::crc32c(namespace.as_bytes()).to_be_bytes());
    bytes[4..8].copy_from_slice(b"floe");
    bytes[12..].copy_from_slice(&id.to_be_bytes());
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The id of the schema `guid` names in `namespace`'s registry, if it is one of its GUIDs.
pub fn schema_id_of_guid(namespace: &str, guid: uuid::Uuid) -> Option<i32> {
    let bytes = guid.as_bytes();
    let id = i32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    (schema_guid(namespace, id) == guid).then_some(id)
}

/// The header named `name` among headers held as (name, value) pairs, as
/// [`records::header`] finds one among stored headers.
pub fn header_among<'a, N: AsRef<[u8]>, V: AsRef<[u8]>>(headers: &'a [(N, Option<V>)], name: &[u8]) -> Header<'a> {
    let mut found = headers.iter().filter(|(n, _)| n.as_ref() == name).map(|(_, v)| v.as_ref().map(AsRef::as_ref));
    match (found.next(), found.next()) {
        (None, _) => Header::Absent,
        (Some(value), None) => Header::One(value),
        (Some(_), Some(_)) => Header::Repeated,
    }
}

/// Where a key's or value's schema is named, as Confluent's deserializers look for it: a
/// `__key_schema_id` / `__value_schema_id` header if the record has one (magic byte 1 and a
/// GUID, or magic byte 0 and an id; a Protobuf schema's message indexes after it), the payload
/// then being the whole key or value; else the payload's own framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaName {
    Id(i32),
    Guid(uuid::Uuid),
}

/// A key's or value's schema and payload: what names the schema, the Protobuf message
/// indexes when they are in a header (else at the payload's start), and the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    pub schema: SchemaName,
    pub header_indexes: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

/// Reads a key's or value's framing, from `header` (the record's schema id header for it) if
/// given, else from `bytes`.
pub fn framed<'a>(bytes: &'a [u8], header: Option<&'a [u8]>) -> Option<Framed<'a>> {
    let Some(header) = header else {
        let (magic, id, payload) = framing(bytes)?;
        return (magic == 0).then_some(Framed { schema: SchemaName::Id(id), header_indexes: None, payload });
    };
    let (&magic, rest) = header.split_first()?;
    let (schema, indexes) = match magic {
        0 => {
            let (id, rest) = rest.split_first_chunk::<4>()?;
            (SchemaName::Id(i32::from_be_bytes(*id)), rest)
        }
        1 => {
            let (guid, rest) = rest.split_first_chunk::<16>()?;
            (SchemaName::Guid(uuid::Uuid::from_bytes(*guid)), rest)
        }
        _ => return None,
    };
    Some(Framed { schema, header_indexes: Some(indexes), payload: bytes })
}

/// The registry's framing: magic byte, schema id, payload.
pub fn framing(bytes: &[u8]) -> Option<(u8, i32, &[u8])> {
    let (&magic, rest) = bytes.split_first()?;
    let (id, payload) = rest.split_first_chunk::<4>()?;
    Some((magic, i32::from_be_bytes(*id), payload))
}

/// The language a stored schema type is parsed as.
pub fn format_of(schema_type: SchemaType) -> SchemaFormat {
    match schema_type {
        SchemaType::Avro => SchemaFormat::Avro,
        SchemaType::Json => SchemaFormat::Json,
        SchemaType::Protobuf => SchemaFormat::Protobuf,
    }
}

/// The schemas `references` name, and theirs, depth first, each once, as (the name it is
/// referred to by, its text): what a schema is parsed with. Fails on a reference to no live
/// version, or nesting past 16 levels or [`floe_metadata::limits::SCHEMA_REFERENCES_MAX`]
/// schemas.
pub fn reference_texts(
    registry: &SchemaRegistry,
    references: &[SchemaReference],
) -> Result<Vec<(String, String)>, String> {
    let mut texts = Vec::new();
    collect_reference_texts(registry, references, &mut texts, &mut HashSet::new(), 0)?;
    Ok(texts)
}

fn collect_reference_texts(
    registry: &SchemaRegistry,
    references: &[SchemaReference],
    texts: &mut Vec<(String, String)>,
    // Subject versions already walked: 256 references to one version, nested, would otherwise
    // be walked 256^depth times.
    seen: &mut HashSet<(String, i32)>,
    depth: usize,
) -> Result<(), String> {
    if depth > 16 || texts.len() > floe_metadata::limits::SCHEMA_REFERENCES_MAX {
        return Err("references nest too deep or are too many".into());
    }
    for r in references {
        let id = registry
            .subjects
            .get(&r.subject)
            .and_then(|s| s.versions.get(&r.version))
            .filter(|v| !v.deleted)
            .map(|v| v.id)
            .ok_or_else(|| {
                format!("Invalid schema: reference {} to subject {} version {} not found", r.name, r.subject, r.version)
            })?;
        if !seen.insert((r.subject.clone(), r.version)) {
            continue;
        }
        let Some(schema) = registry.schemas.get(&id) else { continue };
        collect_reference_texts(registry, &schema.content.references, texts, seen, depth + 1)?;
        texts.push((r.name.clone(), schema.content.text.clone()));
    }
    Ok(())
}

/// Bytes of the parsed schemas an agent keeps (their text, and a JSON Schema's compiled patterns
/// as measured when parsed); past it the oldest are dropped.
const PARSED_SCHEMA_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Parsed schemas by namespace and id. An id's content never changes (ids are never reused in
/// a namespace), so an entry never goes stale; entries go oldest first past
/// [`PARSED_SCHEMA_BYTES_MAX`] (counted in text bytes plus compiled patterns).
#[derive(Default)]
pub struct ParsedSchemas {
    cache: Mutex<ParsedCache>,
    /// When validation last caught the mirror up, for [`ParsedSchemas::may_catch_up`].
    catch_ups: Mutex<CatchUps>,
}

#[derive(Default)]
struct ParsedCache {
    by_id: HashMap<(String, i32), CachedSchema>,
    order: VecDeque<((String, i32), usize)>,
    bytes: usize,
}

/// A parse result (a stored schema that fails to parse fails every time, so that is kept too)
/// and what identifies the text it came from: an id whose schema was deleted for good may be
/// given again to other content in IMPORT mode.
struct CachedSchema {
    parsed: Result<Arc<ParsedSchema>, String>,
    /// Where the text lay in the mirror when checked last: the same place is the same text.
    text_at: usize,
    text_len: usize,
    text_crc: u32,
}

impl CachedSchema {
    /// Whether `text` is the text this entry was parsed from (and notes where it lies now).
    fn is_of(&mut self, text: &str) -> bool {
        if text.as_ptr() as usize == self.text_at && text.len() == self.text_len {
            return true;
        }
        let same = text.len() == self.text_len && crc32c::crc32c(text.as_bytes()) == self.text_crc;
        if same {
            self.text_at = text.as_ptr() as usize;
        }
        same
    }
}

/// Validation's catch-ups with the metadata leader in the current one-second window.
#[derive(Default)]
struct CatchUps {
    window_start_ms: i64,
    count: u32,
}

/// Catch-ups produce-time validation may ask for per agent and second: a misconfigured or
/// hostile producer naming unknown schemas must not turn each request into a leader round trip.
const VALIDATION_CATCH_UPS_PER_SEC_MAX: u32 = 20;

impl std::fmt::Debug for ParsedSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cache = self.lock();
        f.debug_struct("ParsedSchemas").field("schemas", &cache.by_id.len()).field("bytes", &cache.bytes).finish()
    }
}

impl ParsedSchemas {
    /// Schema `id` of `registry` (namespace `namespace`), parsed with its references.
    pub fn get(&self, namespace: &str, id: i32, registry: &SchemaRegistry) -> Result<Arc<ParsedSchema>, String> {
        let schema = registry.schemas.get(&id).ok_or_else(|| format!("Schema {id} not found"))?;
        let key = (namespace.to_owned(), id);
        if let Some(hit) = self.lock().by_id.get_mut(&key)
            && hit.is_of(&schema.content.text)
        {
            return hit.parsed.clone();
        }
        let format = format_of(schema.content.schema_type);
        let parsed = reference_texts(registry, &schema.content.references).and_then(|texts| {
            let refs: Vec<(&str, &str)> = texts.iter().map(|(name, text)| (name.as_str(), text.as_str())).collect();
            ParsedSchema::parse(format, &schema.content.text, &refs)
                .map(Arc::new)
                .map_err(|e| format!("a stored schema no longer parses: {e}"))
        });
        let text = &schema.content.text;
        // A JSON Schema's compiled patterns can be a megabyte for a few bytes of text.
        let size = text.len() + parsed.as_ref().map_or(0, |p| p.compiled_bytes());
        let entry = CachedSchema {
            parsed: parsed.clone(),
            text_at: text.as_ptr() as usize,
            text_len: text.len(),
            text_crc: crc32c::crc32c(text.as_bytes()),
        };
        let mut cache = self.lock();
        if cache.by_id.insert(key.clone(), entry).is_none() {
            cache.order.push_back((key, size));
            cache.bytes += size;
        }
        while cache.bytes > PARSED_SCHEMA_BYTES_MAX {
            let Some((old, size)) = cache.order.pop_front() else { break };
            cache.by_id.remove(&old);
            cache.bytes -= size;
        }
        parsed
    }

    /// Whether produce-time validation may catch the mirror up now (at most
    /// [`VALIDATION_CATCH_UPS_PER_SEC_MAX`] a second per agent); counts the one it allows.
    pub fn may_catch_up(&self, now_ms: i64) -> bool {
        let mut c = self.catch_ups.lock_recovered();
        if now_ms.saturating_sub(c.window_start_ms) >= 1000 {
            *c = CatchUps { window_start_ms: now_ms, count: 0 };
        }
        c.count += 1;
        c.count <= VALIDATION_CATCH_UPS_PER_SEC_MAX
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ParsedCache> {
        self.cache.lock_recovered()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_is_magic_id_payload() {
        assert_eq!(framing(&[0, 0, 0, 1, 2, 9, 9]), Some((0, 258, &[9u8, 9][..])));
        assert_eq!(framing(&[0, 0, 0, 1]), None, "an id needs 4 bytes");
        assert_eq!(framing(&[]), None);
    }

    #[test]
    fn guids_map_back_to_their_ids_only_in_their_namespace() {
        let guid = schema_guid("t-7", 42);
        assert_eq!(guid.get_version_num(), 8, "a custom (version 8) UUID");
        assert_eq!(schema_id_of_guid("t-7", guid), Some(42));
        assert_eq!(schema_guid("t-7", 42), guid, "stable");
        assert_eq!(schema_id_of_guid("t-8", guid), None, "another tenant's registry");
        assert_ne!(schema_guid("t-7", 43), guid);
        assert_eq!(schema_id_of_guid("t-7", uuid::Uuid::new_v4()), None);
    }

    #[test]
    fn a_schema_id_header_names_the_schema_and_leaves_the_payload_whole() {
        let guid = schema_guid("", 3);
        let mut header = vec![1];
        header.extend_from_slice(guid.as_bytes());
        header.extend_from_slice(&[2, 2]);
        let framed_by_header = framed(b"raw", Some(&header)).expect("framed");
        assert_eq!(framed_by_header.schema, SchemaName::Guid(guid));
        assert_eq!(framed_by_header.header_indexes, Some(&[2u8, 2][..]));
        assert_eq!(framed_by_header.payload, b"raw");
        let by_id = framed(b"raw", Some(&[0, 0, 0, 0, 9])).expect("framed");
        assert_eq!((by_id.schema, by_id.payload), (SchemaName::Id(9), &b"raw"[..]));
        assert_eq!(framed(b"raw", Some(&[1, 2, 3])), None, "a GUID needs 16 bytes");
        assert_eq!(framed(b"raw", Some(&[2; 20])), None, "magic byte 2");
        let in_payload = framed(&[0, 0, 0, 0, 5, 7], None).expect("framed");
        assert_eq!(
            (in_payload.schema, in_payload.header_indexes, in_payload.payload),
            (SchemaName::Id(5), None, &[7u8][..])
        );
    }

    #[test]
    fn validation_catches_up_at_most_so_often() {
        let parsed = ParsedSchemas::default();
        let allowed = (0..100).filter(|_| parsed.may_catch_up(5_000)).count();
        assert_eq!(allowed, VALIDATION_CATCH_UPS_PER_SEC_MAX as usize);
        assert!(parsed.may_catch_up(6_000), "a new second");
    }

    #[test]
    fn a_cached_parse_is_used_only_for_the_text_it_came_from() {
        let text = String::from("{\"type\":\"string\"}");
        let mut entry = CachedSchema {
            parsed: Err("x".into()),
            text_at: 0,
            text_len: text.len(),
            text_crc: crc32c::crc32c(text.as_bytes()),
        };
        assert!(entry.is_of(&text), "the same text elsewhere in memory");
        assert!(entry.is_of(&text.clone()));
        assert!(!entry.is_of("{\"type\":\"bytes\"}"), "other content under a reused id");
    }

    #[test]
    fn strategies_read_short_and_class_names() {
        use SubjectNameStrategy::*;
        assert_eq!(SubjectNameStrategy::from_config(None), TopicName);
        assert_eq!(SubjectNameStrategy::from_config(Some("RecordNameStrategy")), RecordName);
        assert_eq!(
            SubjectNameStrategy::from_config(Some("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy")),
            TopicRecordName
        );
    }
}
