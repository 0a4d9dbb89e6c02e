use proptest::prelude::*;

use super::*;
use crate::command::Command;

/// What every registry must hold after any command sequence.
pub(in crate::state) fn check_registry_invariants(state: &State) {
    for (namespace, registry) in &state.registries {
        assert!(namespace.is_empty() || state.tenant_of_key(namespace).is_some(), "registry of a live namespace");
        assert!(!registry.is_empty(), "an empty registry has no entry");
        let mut uses: BTreeMap<i32, u32> = BTreeMap::new();
        for (name, subject) in &registry.subjects {
            assert!(!subject.versions.is_empty(), "subject {name:?} without versions is dropped");
            for v in subject.versions.values() {
                *uses.entry(v.id).or_default() += 1;
            }
        }
        let mut bytes = 0;
        for (id, schema) in &registry.schemas {
            assert!(*id >= 1 && *id <= registry.last_id, "ids come from last_id");
            assert_eq!(uses.get(id).copied(), Some(schema.uses), "schema {id} counts the versions naming it");
            assert_eq!(registry.id_of(&schema.content), Some(*id), "schema {id} is in the content index");
            bytes += schema.content.stored_bytes();
            for r in &schema.content.references {
                assert!(registry.referenced_by[&(r.subject.clone(), r.version)].contains(id));
                assert!(
                    registry.subjects.get(&r.subject).is_some_and(|s| s.versions.contains_key(&r.version)),
                    "a stored schema's references exist"
                );
            }
        }
        assert_eq!(uses.len(), registry.schemas.len(), "every version names a stored schema");
        assert_eq!(bytes, registry.bytes);
        assert_eq!(registry.by_digest.values().map(Vec::len).sum::<usize>(), registry.schemas.len());
        for ((subject, version), ids) in &registry.referenced_by {
            assert!(!ids.is_empty());
            for id in ids {
                let refs = &registry.schemas[id].content.references;
                assert!(refs.iter().any(|r| &r.subject == subject && r.version == *version));
            }
        }
    }
}

fn avro(text: &str) -> SchemaContent {
    SchemaContent { schema_type: SchemaType::Avro, text: text.into(), references: Vec::new() }
}

fn register(state: &State, subject: &str, content: SchemaContent) -> Command {
    let checked_at = state.schema_registry("").map(|r| r.revision(subject)).unwrap_or_default();
    Command::RegisterSchema(SchemaRegistration {
        namespace: String::new(),
        subject: subject.into(),
        content: content.into(),
        import: None,
        checked_at,
        now_ms: 1,
    })
}

struct Registry {
    state: State,
}

impl Registry {
    fn new() -> Self {
        Self { state: State::default() }
    }

    fn apply(&mut self, command: Command) -> Result<Outcome, CommandError> {
        let before = self.state.clone();
        let index = self.state.applied_index + 1;
        let outcome = self.state.apply(index, command);
        if outcome.is_err() {
            let mut unchanged = self.state.clone();
            unchanged.applied_index = before.applied_index;
            assert_eq!(unchanged, before, "a refused command changes nothing");
        }
        check_registry_invariants(&self.state);
        outcome
    }

    fn register(&mut self, subject: &str, text: &str) -> Result<(i32, i32), CommandError> {
        match self.apply(register(&self.state, subject, avro(text)))? {
            Outcome::SchemaRegistered { id, version } => Ok((id, version)),
            other => panic!("{other:?}"),
        }
    }

    fn delete(&mut self, subject: &str, version: Option<i32>, permanent: bool) -> Result<Vec<i32>, RegistryError> {
        let command =
            Command::DeleteSchemaVersions { namespace: String::new(), subject: subject.into(), version, permanent };
        match self.apply(command) {
            Ok(Outcome::SchemaVersionsDeleted(v)) => Ok(v),
            Err(CommandError::Registry(e)) => Err(e),
            other => panic!("{other:?}"),
        }
    }

    fn registry(&self) -> &SchemaRegistry {
        self.state.schema_registry("").expect("a registry")
    }
}

fn registry_error(result: Result<(i32, i32), CommandError>) -> RegistryError {
    match result {
        Err(CommandError::Registry(e)) => e,
        other => panic!("expected a registry error, got {other:?}"),
    }
}

#[test]
fn the_same_schema_gets_the_same_id_in_every_subject_and_a_retry_its_version() {
    let mut r = Registry::new();
    assert_eq!(r.register("a-value", "\"string\"").ok(), Some((1, 1)));
    assert_eq!(r.register("a-value", "\"string\"").ok(), Some((1, 1)), "registered again: same version");
    assert_eq!(r.register("b-value", "\"string\"").ok(), Some((1, 1)), "another subject: same id");
    assert_eq!(r.register("a-value", "\"long\"").ok(), Some((2, 2)));
    assert_eq!(r.registry().schemas[&1].uses, 2);
}

#[test]
fn a_check_made_at_an_older_revision_is_refused_as_stale() {
    let mut r = Registry::new();
    let early = register(&r.state, "s", avro("\"int\""));
    r.register("s", "\"string\"").expect("register");
    assert_eq!(r.apply(early).err(), Some(CommandError::Registry(RegistryError::Stale)));
    // A config change also makes an earlier check stale.
    let early = register(&r.state, "s", avro("\"long\""));
    let config = RegistryConfig { compatibility: Some(Compatibility::Full), normalize: None };
    r.apply(Command::SetRegistryConfig { namespace: String::new(), subject: None, config: Some(config.into()) })
        .expect("config");
    assert_eq!(r.apply(early).err(), Some(CommandError::Registry(RegistryError::Stale)));
}

#[test]
fn deletes_go_soft_then_permanent_and_ids_are_never_reused() {
    let mut r = Registry::new();
    r.register("s", "\"int\"").expect("v1");
    r.register("s", "\"long\"").expect("v2");
    assert_eq!(r.delete("s", Some(3), false), Err(RegistryError::VersionNotFound(3)));
    assert_eq!(r.delete("nope", None, false), Err(RegistryError::SubjectNotFound("nope".into())));
    assert_eq!(
        r.delete("s", Some(1), true),
        Err(RegistryError::VersionNotSoftDeleted { subject: "s".into(), version: 1 })
    );
    assert_eq!(r.delete("s", Some(1), false), Ok(vec![1]));
    assert_eq!(
        r.delete("s", Some(1), false),
        Err(RegistryError::VersionSoftDeleted { subject: "s".into(), version: 1 })
    );
    assert_eq!(r.delete("s", None, true), Err(RegistryError::SubjectNotSoftDeleted("s".into())));
    assert_eq!(r.delete("s", None, false), Ok(vec![2]));
    assert_eq!(r.delete("s", None, false), Err(RegistryError::SubjectSoftDeleted("s".into())));
    // Soft-deleted versions still take version numbers; the schema again is a new version.
    assert_eq!(r.register("s", "\"int\"").ok(), Some((1, 3)));
    r.delete("s", None, false).expect("soft");
    assert_eq!(r.delete("s", None, true), Ok(vec![1, 2, 3]));
    assert!(r.state.schema_registry("").is_some_and(|g| g.subjects.is_empty() && g.schemas.is_empty()));
    // Every use gone: the same schema now gets a new id, and the subject starts at version 1.
    assert_eq!(r.register("s", "\"int\"").ok(), Some((3, 1)));
}

#[test]
fn references_must_exist_and_keep_what_they_name_from_deletion() {
    let mut r = Registry::new();
    r.register("common", "{\"type\":\"fixed\",\"name\":\"Id\",\"size\":16}").expect("common");
    let mut content = avro("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"id\",\"type\":\"Id\"}]}");
    content.references = vec![SchemaReference { name: "Id".into(), subject: "common".into(), version: 2 }];
    let missing = r.apply(register(&r.state, "r-value", content.clone()));
    assert!(matches!(missing, Err(CommandError::Registry(RegistryError::InvalidSchema(_)))), "{missing:?}");
    content.references[0].version = 1;
    r.apply(register(&r.state, "r-value", content)).expect("with its reference");
    assert_eq!(r.registry().referrers("common", 1, true), vec![2]);
    assert_eq!(
        r.delete("common", Some(1), false),
        Err(RegistryError::ReferenceExists { subject: "common".into(), version: 1 })
    );
    r.delete("r-value", None, false).expect("soft-delete the referrer");
    assert_eq!(r.delete("common", Some(1), false), Ok(vec![1]), "only a live referrer keeps it");
    assert_eq!(
        r.delete("common", Some(1), true),
        Err(RegistryError::ReferenceExists { subject: "common".into(), version: 1 }),
        "a stored referrer keeps it from permanent deletion"
    );
    r.delete("r-value", None, true).expect("drop the referrer");
    assert_eq!(r.delete("common", Some(1), true), Ok(vec![1]));
}

#[test]
fn modes_decide_who_may_register_and_import_keeps_the_ids_it_is_given() {
    let mut r = Registry::new();
    r.register("s", "\"int\"").expect("v1");
    let mode = |mode, force| Command::SetRegistryMode { namespace: String::new(), subject: None, mode, force };
    assert!(matches!(
        r.apply(mode(Some(RegistryMode::Import), false)),
        Err(CommandError::Registry(RegistryError::OperationNotPermitted(_)))
    ));
    r.apply(mode(Some(RegistryMode::ReadOnly), false)).expect("read-only");
    assert!(matches!(registry_error(r.register("s", "\"long\"")), RegistryError::OperationNotPermitted(_)));
    assert!(matches!(r.delete("s", None, false), Err(RegistryError::OperationNotPermitted(_))));
    assert_eq!(
        r.apply(mode(Some(RegistryMode::Import), true)),
        Ok(Outcome::RegistryModeSet(Some(RegistryMode::ReadOnly)))
    );
    assert!(
        matches!(registry_error(r.register("t", "\"long\"")), RegistryError::OperationNotPermitted(_)),
        "import needs ids"
    );
    let import = |state: &State, subject: &str, text: &str, id, version| {
        let Command::RegisterSchema(mut reg) = register(state, subject, avro(text)) else { unreachable!() };
        reg.import = Some((id, version));
        Command::RegisterSchema(reg)
    };
    assert_eq!(
        r.apply(import(&r.state, "t", "\"long\"", 100, Some(7))),
        Ok(Outcome::SchemaRegistered { id: 100, version: 7 })
    );
    assert!(matches!(
        r.apply(import(&r.state, "u", "\"bytes\"", 100, None)),
        Err(CommandError::Registry(RegistryError::IdConflict(_)))
    ));
    r.apply(mode(None, false)).expect("back to READWRITE");
    assert_eq!(r.register("t", "\"bytes\"").ok(), Some((101, 8)), "ids and versions go on after the imported ones");
}

#[test]
fn a_tenants_registry_is_its_own_and_goes_with_the_tenant() {
    let mut state = State::default();
    let mut index = 0;
    let mut apply = |state: &mut State, c| {
        index += 1;
        state.apply(index, c)
    };
    apply(&mut state, Command::CreateTenant { name: "acme".into(), now_ms: 0 }).expect("tenant");
    let key = crate::namespace::namespace_key("acme", state.tenants["acme"].id);
    let reg = |namespace: &str| {
        Command::RegisterSchema(SchemaRegistration {
            namespace: namespace.into(),
            subject: "s".into(),
            content: avro("\"int\"").into(),
            import: None,
            checked_at: RegistryRevision::default(),
            now_ms: 0,
        })
    };
    assert_eq!(apply(&mut state, reg(&key)), Ok(Outcome::SchemaRegistered { id: 1, version: 1 }));
    assert_eq!(
        apply(&mut state, reg("")),
        Ok(Outcome::SchemaRegistered { id: 1, version: 1 }),
        "ids are per namespace"
    );
    assert!(matches!(apply(&mut state, reg("ghost#9")), Err(CommandError::Registry(_))));
    apply(&mut state, Command::DeleteTenant { name: "acme".into() }).expect("delete");
    assert!(state.schema_registry(&key).is_none());
    assert!(matches!(apply(&mut state, reg(&key)), Err(CommandError::Registry(_))), "late write of a deleted tenant");
    check_registry_invariants(&state);
}

#[test]
fn limits_refuse_oversized_schemas_and_bad_subjects() {
    let mut r = Registry::new();
    let big = format!("\"{}\"", "x".repeat(SCHEMA_TEXT_BYTES_MAX));
    assert!(matches!(registry_error(r.register("s", &big)), RegistryError::TooLarge(_)));
    for bad in ["", ":.ctx:s", "a\u{0}b", &"s".repeat(SUBJECT_NAME_BYTES_MAX + 1)] {
        assert!(matches!(registry_error(r.register(bad, "\"int\"")), RegistryError::InvalidSubject(_)), "{bad:?}");
    }
    assert!(r.state.registries.is_empty(), "refusals leave no registry behind");
}

/// Registry commands over two subjects, a few schemas and both namespaces of the generated
/// tenants, for the state machine's property tests.
pub(in crate::state) fn arb_registry_command() -> impl Strategy<Value = Command> {
    let namespace = prop_oneof![Just(String::new()), Just("tenant0#1".to_owned())];
    let subject = (0u8..2).prop_map(|s| format!("s{s}"));
    let text = (0u8..4).prop_map(|t| format!("\"t{t}\""));
    prop_oneof![
        4 => (namespace.clone(), subject.clone(), text, any::<bool>(), 0u64..3, proptest::option::of((1i32..4, proptest::option::of(1i32..4))))
            .prop_map(|(namespace, subject, text, with_ref, revision, import)| {
                let references = if with_ref {
                    vec![SchemaReference { name: "T".into(), subject: "s0".into(), version: 1 }]
                } else {
                    Vec::new()
                };
                let content = SchemaContent { schema_type: SchemaType::Avro, text, references };
                let checked_at = RegistryRevision { subject: revision, config: 0 };
                Command::RegisterSchema(SchemaRegistration { namespace, subject, content: content.into(), import, checked_at, now_ms: 0 })
            }),
        2 => (namespace.clone(), subject.clone(), proptest::option::of(1i32..4), any::<bool>())
            .prop_map(|(namespace, subject, version, permanent)| Command::DeleteSchemaVersions { namespace, subject, version, permanent }),
        1 => (namespace.clone(), proptest::option::of(subject.clone()), any::<bool>()).prop_map(|(namespace, subject, set)| {
            let config = set.then_some(RegistryConfig { compatibility: Some(Compatibility::Full), normalize: None });
            Command::SetRegistryConfig { namespace, subject, config: config.map(Into::into) }
        }),
        1 => (namespace, proptest::option::of(subject), 0u8..4, any::<bool>()).prop_map(|(namespace, subject, m, force)| {
            let mode = [None, Some(RegistryMode::ReadWrite), Some(RegistryMode::ReadOnly), Some(RegistryMode::Import)][m as usize];
            Command::SetRegistryMode { namespace, subject, mode, force }
        }),
    ]
}

proptest! {
    /// Ids only grow within a namespace, equal content always has one id, and replaying the
    /// same commands gives the same registries.
    #[test]
    fn ids_grow_and_equal_content_keeps_one_id(commands in proptest::collection::vec(arb_registry_command(), 0..80)) {
        let mut state = State::default();
        let mut last: BTreeMap<String, i32> = BTreeMap::new();
        for (i, command) in commands.iter().enumerate() {
            let before = state.clone();
            let outcome = state.apply(i as u64 + 1, command.clone());
            if let (Ok(Outcome::SchemaRegistered { id, .. }), Command::RegisterSchema(reg)) = (&outcome, command) {
                let previous = before.schema_registry(&reg.namespace).and_then(|r| r.id_of(&reg.content.clone().into()));
                if let Some(previous) = previous {
                    prop_assert_eq!(*id, previous, "known content keeps its id");
                } else if reg.import.is_none() {
                    prop_assert!(*id > last.get(&reg.namespace).copied().unwrap_or(0), "a new id is above every earlier one");
                }
                let seen = last.entry(reg.namespace.clone()).or_default();
                *seen = (*seen).max(*id);
            }
            check_registry_invariants(&state);
        }
    }
}
