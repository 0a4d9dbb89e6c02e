//! Keys and values read over HTTP with `format=json`: data written in the registry's framing
//! (magic byte 0, a schema id of the topic's tenant's registry, the payload; or the schema's id
//! or GUID in a `__key_schema_id` / `__value_schema_id` header) is shown decoded
//! with its schema (when the reader may read that schema), other JSON as itself, anything else
//! as base64.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use base64::Engine;
use floe_agent::Agent;
use floe_agent::access::Access;
use floe_metadata::SchemaType;
use floe_registry::ParsedSchema;
use serde_json::{Value, json};

use crate::extract::Scope;
use crate::routes::schema_registry::may_read_schema;

/// Distinct schema ids one reader remembers; past them, each record looks its id up again.
const REMEMBERED_IDS_MAX: usize = 64;

/// Decodes the records of one read (or one event stream) for one registry namespace.
pub(crate) struct SchemaJson {
    agent: Arc<Agent>,
    namespace: String,
    /// The reader's ACLs (none without `--authorizer`): a schema it may not read is not used.
    access: Option<Access>,
    /// Schemas found so far, by id (an id's schema never changes; one not found yet may be
    /// registered later, so misses are looked up again).
    found: HashMap<i32, (SchemaType, Arc<ParsedSchema>)>,
    /// Ids the reader may not read (ACLs are checked again by its next read or stream).
    denied: HashSet<i32>,
}

impl SchemaJson {
    /// For `scope`'s caller reading `topic` (as the caller names it): the topic's tenant's
    /// registry, as produce-time validation and HTTP produce use.
    pub(crate) fn for_topic(agent: Arc<Agent>, scope: &Scope, topic: &str) -> Self {
        let stored = scope.stored(topic);
        let namespace = floe_metadata::namespace::key_of(&stored).unwrap_or("").to_owned();
        Self { agent, namespace, access: scope.access().cloned(), found: HashMap::new(), denied: HashSet::new() }
    }

    fn schema(&mut self, id: i32) -> Option<(SchemaType, Arc<ParsedSchema>)> {
        if let Some(found) = self.found.get(&id) {
            return Some(found.clone());
        }
        if self.denied.contains(&id) {
            return None;
        }
        let (found, denied) = {
            let state = self.agent.metadata.read();
            match state.schema_registry(&self.namespace) {
                None => (None, false),
                Some(r) if !r.schemas.contains_key(&id) => (None, false),
                Some(r) if !may_read_schema(&state, self.access.as_ref(), r, id) => (None, true),
                Some(r) => {
                    let schema_type = r.schemas.get(&id).map(|s| s.content.schema_type);
                    let parsed = self.agent.parsed_schemas.get(&self.namespace, id, r).ok();
                    (schema_type.zip(parsed), false)
                }
            }
        };
        if denied && self.denied.len() < REMEMBERED_IDS_MAX {
            self.denied.insert(id);
        }
        if let Some(found) = &found
            && self.found.len() < REMEMBERED_IDS_MAX
        {
            self.found.insert(id, found.clone());
        }
        found
    }

    /// A key or value as `{"type", "data"}` (and `schema_id` when decoded with a schema);
    /// `header` is the record's schema id header for it (`__key_schema_id`, `__value_schema_id`).
    pub(crate) fn show(&mut self, bytes: &[u8], header: Option<&[u8]>) -> Value {
        use floe_agent::produce::schemas::{SchemaName, framed, schema_id_of_guid};
        let found = framed(bytes, header).and_then(|f| {
            let id = match f.schema {
                SchemaName::Id(id) => id,
                SchemaName::Guid(guid) => schema_id_of_guid(&self.namespace, guid)?,
            };
            Some((id, f))
        });
        if let Some((id, f)) = found
            && let Some((schema_type, schema)) = self.schema(id)
            && let Ok(data) = match f.header_indexes {
                // Protobuf's message indexes went into the header with the schema.
                Some(indexes) if schema_type == SchemaType::Protobuf => {
                    schema.decode_json(&[indexes, f.payload].concat())
                }
                _ => schema.decode_json(f.payload),
            }
        {
            let shown_type = crate::produce::schema_data::data_type_of(schema_type);
            return json!({ "type": shown_type, "schema_id": id, "data": data });
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(data) => json!({ "type": "JSON", "data": data }),
            Err(_) => json!({ "type": "BINARY", "data": base64::engine::general_purpose::STANDARD.encode(bytes) }),
        }
    }
}
