//! Protobuf schemas: `.proto` text or a base64 `FileDescriptorProto` (what confluent-kafka's
//! Python serializer registers), compiled without protoc (protox) against the schema's
//! references (its imports, by name), the well-known `google/protobuf/*.proto` files and the
//! files clients import without registering ([`BUILTIN_FILES`]: `google/type/`, `confluent/`); the
//! canonical text ids are given for; payload checks with Confluent's message indexes; and
//! compatibility in the terms of Confluent's Protobuf differences.

mod print;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost::Message as _;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor, Syntax,
};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto, UninterpretedOption,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::{Difference, SchemaError, limits};

/// The file name a schema registered as text is compiled under (its imports name others).
const MAIN_FILE: &str = "default.proto";
/// Message indexes a payload may carry (nesting depth of the message it names).
const MESSAGE_INDEXES_MAX: usize = 64;

/// A compiled Protobuf schema.
pub struct ProtobufSchema {
    pool: DescriptorPool,
    /// The schema's own file, as `prost_types` (no custom options) and as compiled.
    file: FileDescriptorProto,
    main: FileDescriptor,
    canonical: String,
}

impl std::fmt::Debug for ProtobufSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufSchema").field("file", &self.file.name).finish()
    }
}

fn invalid(why: impl std::fmt::Display) -> SchemaError {
    SchemaError::Invalid(format!("Invalid schema: {why}"))
}

/// Deepest nesting of braces (messages, enums, option values) in a `.proto` text, and of
/// nested messages in a descriptor: the parser recurses per level, and a stack overflow would
/// take the whole process down.
const NESTING_MAX: usize = 32;
/// Largest payload full validation decodes: a decoded message takes tens of times its encoded
/// size in memory.
const DECODED_PAYLOAD_BYTES_MAX: usize = 4 * 1024 * 1024;

/// A schema text as a protox file: `.proto` source, else a base64 `FileDescriptorProto` (whose
/// extension options are kept). Refuses nesting past [`NESTING_MAX`] before anything recurses
/// over it, and names past [`limits::PROTOBUF_NAME_BYTES_MAX`] before any is built.
fn file_of(name: &str, text: &str) -> Result<File, protox::Error> {
    // As in `compile`: a panic in the parser refuses the schema.
    std::panic::catch_unwind(|| file_of_unguarded(name, text))
        .unwrap_or_else(|_| Err(protox::Error::new(std::io::Error::other("the Protobuf parser failed on this schema"))))
}

fn file_of_unguarded(name: &str, text: &str) -> Result<File, protox::Error> {
    let refuse = |why: String| protox::Error::new(std::io::Error::other(why));
    let file = match BASE64.decode(text.trim()) {
        Ok(bytes) if !looks_like_source(text) => {
            let file = File::decode_file_descriptor_proto(bytes.as_slice()).map_err(protox::Error::new)?;
            if file.name().is_empty() {
                return Err(refuse("a descriptor needs a file name".into()));
            }
            file
        }
        _ => {
            if brace_depth(text) > NESTING_MAX {
                return Err(refuse(format!("the schema nests deeper than {NESTING_MAX} levels")));
            }
            File::from_source(name, text)?
        }
    };
    if message_depth(&file.file_descriptor_proto().message_type) > NESTING_MAX {
        return Err(refuse(format!("messages nest deeper than {NESTING_MAX} levels")));
    }
    let names = name_bytes(file.file_descriptor_proto());
    if names > limits::PROTOBUF_NAME_BYTES_MAX {
        return Err(refuse(names_refused(names)));
    }
    Ok(file)
}

fn names_refused(bytes: usize) -> String {
    format!(
        "compiling the schema would build and look up {bytes} bytes of names (packages, full names, scopes searched), more than {}",
        limits::PROTOBUF_NAME_BYTES_MAX
    )
}

/// Bytes of names compiling `file` builds and looks up ([`limits::PROTOBUF_NAME_BYTES_MAX`]),
/// counted from lengths alone: a hostile file's names are never built to be counted.
fn name_bytes(file: &FileDescriptorProto) -> usize {
    /// A scope's full name, by its length and its dots.
    #[derive(Clone, Copy)]
    struct Scope {
        len: usize,
        dots: usize,
    }
    impl Scope {
        fn child(self, name: &str) -> Scope {
            let dots = name.matches('.').count();
            match self.len {
                0 => Scope { len: name.len(), dots },
                len => Scope { len: len.saturating_add(1 + name.len()), dots: self.dots.saturating_add(1 + dots) },
            }
        }
        /// A name used relatively is looked for in this scope, then in each enclosing one: each
        /// candidate a full name built and hashed.
        fn lookup(self, name: &str) -> usize {
            (self.dots + 1).saturating_mul(self.len.saturating_add(1 + name.len()))
        }
        /// The custom options' names, each looked up from this scope.
        fn options(self, options: &[UninterpretedOption]) -> usize {
            let parts = options.iter().flat_map(|o| &o.name).filter(|part| part.is_extension);
            parts.fold(0, |bytes: usize, part| bytes.saturating_add(self.lookup(&part.name_part)))
        }
        fn field(self, field: &FieldDescriptorProto) -> usize {
            let used =
                [field.type_name(), field.extendee()].into_iter().filter(|n| !n.is_empty() && !n.starts_with('.'));
            let options = field.options.as_ref().map_or(0, |o| self.options(&o.uninterpreted_option));
            used.fold(self.child(field.name()).len.saturating_add(options), |bytes, n| {
                bytes.saturating_add(self.lookup(n))
            })
        }
        fn enumeration(self, e: &EnumDescriptorProto) -> usize {
            let own = self.child(e.name());
            let options = e.options.as_ref().map_or(0, |o| self.options(&o.uninterpreted_option));
            e.value.iter().fold(own.len.saturating_add(options), |bytes, value| {
                let options = value.options.as_ref().map_or(0, |o| self.options(&o.uninterpreted_option));
                bytes.saturating_add(own.child(value.name()).len).saturating_add(options)
            })
        }
    }
    let package = Scope { len: 0, dots: 0 }.child(file.package());
    // `a.b.c` is also the packages `a` and `a.b`.
    let mut bytes = file.package().match_indices('.').fold(package.len, |bytes, (at, _)| bytes.saturating_add(at));
    let mut add = |more: usize| bytes = bytes.saturating_add(more);
    add(file.options.as_ref().map_or(0, |o| package.options(&o.uninterpreted_option)));
    file.enum_type.iter().for_each(|e| add(package.enumeration(e)));
    file.extension.iter().for_each(|f| add(package.field(f)));
    for service in &file.service {
        let own = package.child(service.name());
        add(own.len);
        add(service.options.as_ref().map_or(0, |o| package.options(&o.uninterpreted_option)));
        for method in &service.method {
            add(own.child(method.name()).len);
            add(method.options.as_ref().map_or(0, |o| own.options(&o.uninterpreted_option)));
            for used in [method.input_type(), method.output_type()] {
                if !used.is_empty() && !used.starts_with('.') {
                    add(own.lookup(used));
                }
            }
        }
    }
    let mut messages: Vec<(&DescriptorProto, Scope)> =
        file.message_type.iter().map(|m| (m, package.child(m.name()))).collect();
    while let Some((message, own)) = messages.pop() {
        add(own.len);
        add(message.options.as_ref().map_or(0, |o| own.options(&o.uninterpreted_option)));
        message.field.iter().chain(&message.extension).for_each(|f| add(own.field(f)));
        for oneof in &message.oneof_decl {
            add(own.child(oneof.name()).len);
            add(oneof.options.as_ref().map_or(0, |o| own.options(&o.uninterpreted_option)));
        }
        message.enum_type.iter().for_each(|e| add(own.enumeration(e)));
        messages.extend(message.nested_type.iter().map(|nested| (nested, own.child(nested.name()))));
    }
    bytes
}

/// `.proto` text has characters base64 never does (spaces, `;`, `{`).
fn looks_like_source(text: &str) -> bool {
    text.trim().bytes().any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r')))
}

/// The deepest brace nesting of `.proto` text, outside comments and string literals.
fn brace_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut star = false;
                for c in chars.by_ref() {
                    if star && c == '/' {
                        break;
                    }
                    star = c == '*';
                }
            }
            '"' | '\'' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        d if d == c => break,
                        _ => {}
                    }
                }
            }
            '{' | '<' | '[' | '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' | '>' | ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deep messages nest in a descriptor (iteratively: the descriptor may be hostile).
fn message_depth(messages: &[DescriptorProto]) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&DescriptorProto, usize)> = messages.iter().map(|m| (m, 1)).collect();
    while let Some((m, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        if depth <= NESTING_MAX {
            stack.extend(m.nested_type.iter().map(|n| (n, depth + 1)));
        }
    }
    deepest
}

/// protoc's rules for map entry messages (`option map_entry = true`), which protox does not
/// enforce and the decoder relies on: exactly an optional `key = 1` of an integral, bool or
/// string type and an optional `value = 2`.
fn check_map_entries(messages: &[DescriptorProto]) -> Result<(), String> {
    let mut stack: Vec<&DescriptorProto> = messages.iter().collect();
    while let Some(m) = stack.pop() {
        stack.extend(&m.nested_type);
        if !m.options.as_ref().is_some_and(|o| o.map_entry()) {
            continue;
        }
        let field = |number: i32| m.field.iter().find(|f| f.number() == number && f.label() == Label::Optional);
        let key_ok = field(1).is_some_and(|k| {
            k.type_name().is_empty()
                && !matches!(
                    k.r#type(),
                    Type::Double | Type::Float | Type::Bytes | Type::Message | Type::Group | Type::Enum
                )
        });
        if m.field.len() != 2 || !key_ok || field(2).is_none() {
            return Err(format!(
                "map entry {} must have an optional key = 1 of an integral, bool or string type and an optional value = 2",
                m.name()
            ));
        }
    }
    Ok(())
}

/// The schema's references by import name, then the well-known files; and the bytes of names
/// the files opened so far may still build ([`limits::PROTOBUF_NAME_BYTES_MAX`] for them all:
/// 256 references at the bound each would be 256 times it).
struct References {
    files: HashMap<String, String>,
    name_bytes_left: Cell<usize>,
}

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let Some(text) = self.files.get(name) else { return Err(protox::Error::file_not_found(name)) };
        let file = file_of(name, text)?;
        let names = name_bytes(file.file_descriptor_proto());
        let left = self.name_bytes_left.get().checked_sub(names).ok_or_else(|| {
            let opened = limits::PROTOBUF_NAME_BYTES_MAX - self.name_bytes_left.get();
            protox::Error::new(std::io::Error::other(names_refused(opened.saturating_add(names))))
        })?;
        self.name_bytes_left.set(left);
        Ok(file)
    }
}

/// The files Confluent's clients import without registering them (their `_is_builtin`:
/// `google/type/` and `confluent/`), written for Floe with the same messages, fields and numbers.
pub const BUILTIN_FILES: [(&str, &str); 21] = [
    ("confluent/meta.proto", include_str!("builtin/confluent/meta.proto")),
    ("confluent/type/decimal.proto", include_str!("builtin/confluent/type/decimal.proto")),
    ("confluent/type/variant.proto", include_str!("builtin/confluent/type/variant.proto")),
    ("confluent/types/decimal.proto", include_str!("builtin/confluent/types/decimal.proto")),
    ("google/type/calendar_period.proto", include_str!("builtin/google/type/calendar_period.proto")),
    ("google/type/color.proto", include_str!("builtin/google/type/color.proto")),
    ("google/type/date.proto", include_str!("builtin/google/type/date.proto")),
    ("google/type/datetime.proto", include_str!("builtin/google/type/datetime.proto")),
    ("google/type/dayofweek.proto", include_str!("builtin/google/type/dayofweek.proto")),
    ("google/type/decimal.proto", include_str!("builtin/google/type/decimal.proto")),
    ("google/type/expr.proto", include_str!("builtin/google/type/expr.proto")),
    ("google/type/fraction.proto", include_str!("builtin/google/type/fraction.proto")),
    ("google/type/interval.proto", include_str!("builtin/google/type/interval.proto")),
    ("google/type/latlng.proto", include_str!("builtin/google/type/latlng.proto")),
    ("google/type/localized_text.proto", include_str!("builtin/google/type/localized_text.proto")),
    ("google/type/money.proto", include_str!("builtin/google/type/money.proto")),
    ("google/type/month.proto", include_str!("builtin/google/type/month.proto")),
    ("google/type/phone_number.proto", include_str!("builtin/google/type/phone_number.proto")),
    ("google/type/postal_address.proto", include_str!("builtin/google/type/postal_address.proto")),
    ("google/type/quaternion.proto", include_str!("builtin/google/type/quaternion.proto")),
    ("google/type/timeofday.proto", include_str!("builtin/google/type/timeofday.proto")),
];

/// The built-in files; a reference of the same name takes precedence.
struct BuiltinFiles;

impl FileResolver for BuiltinFiles {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match BUILTIN_FILES.iter().find(|(file, _)| *file == name) {
            Some((file, text)) => file_of(file, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

impl ProtobufSchema {
    /// Compiles `text` with its references, each (import name, text).
    pub fn parse(text: &str, references: &[(&str, &str)]) -> Result<Self, SchemaError> {
        if references.iter().any(|(name, _)| *name == MAIN_FILE) {
            return Err(invalid(format!("a reference may not be named {MAIN_FILE}")));
        }
        let main = file_of(MAIN_FILE, text).map_err(invalid)?;
        let main_name = if main.name().is_empty() { MAIN_FILE.to_owned() } else { main.name().to_owned() };
        if references.iter().any(|(name, _)| *name == main_name) {
            return Err(invalid(format!("the schema's file name {main_name} is also a reference's")));
        }
        let mut files: HashMap<String, String> =
            references.iter().map(|(name, text)| ((*name).to_owned(), (*text).to_owned())).collect();
        files.insert(main_name.clone(), text.to_owned());
        let (pool, file) = compile(files.clone(), &main_name).map_err(invalid)?;
        // Options are read when files are linked, so map entries are checked on the result.
        for f in pool.files() {
            check_map_entries(&f.file_descriptor_proto().message_type).map_err(invalid)?;
        }
        let main = pool.get_file_by_name(&main_name).ok_or_else(|| invalid("the compiled schema lost its file"))?;
        // The printed text is the canonical one only if it compiles back to the same file;
        // options the printer cannot see (custom ones) keep the descriptor as the text.
        let printed = print::proto_text(&file).filter(|printed| {
            if has_custom_options(&main) {
                return false;
            }
            files.insert(main_name.clone(), printed.clone());
            compile(files, &main_name).is_ok_and(|(_, again)| comparable(&again) == comparable(&file))
        });
        let canonical = printed.unwrap_or_else(|| BASE64.encode(main.encode_to_vec()));
        Ok(Self { pool, file, main, canonical })
    }

    /// The normalized text of `text` ([`crate::ParsedSchema::normalized_text`]): the compiled
    /// file reordered by [`normalized`] and printed, kept only if it compiles back to the same
    /// schema; otherwise (custom options, what the printer cannot write) `text` itself.
    pub fn normalized_text(text: &str, references: &[(&str, &str)]) -> Result<String, SchemaError> {
        let schema = Self::parse(text, references)?;
        let reordered = normalized(&comparable(&schema.file));
        let Some(printed) = print::proto_text(&reordered) else { return Ok(text.to_owned()) };
        let same =
            Self::parse(&printed, references).is_ok_and(|again| normalized(&comparable(&again.file)) == reordered);
        Ok(if same && !has_custom_options(&schema.main) { printed } else { text.to_owned() })
    }

    /// `.proto` text printed from the compiled file (so a text and a base64 registration of
    /// one file are one id), or the base64 descriptor where the printer cannot reproduce it.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The file as a base64 `FileDescriptorProto`, custom options included: what
    /// `format=serialized` answers.
    pub fn serialized(&self) -> String {
        BASE64.encode(self.main.encode_to_vec())
    }

    /// The message a payload's message indexes name, and the payload after them.
    fn message_of<'p>(&self, payload: &'p [u8]) -> Result<(MessageDescriptor, &'p [u8]), String> {
        let (indexes, rest) = message_indexes(payload)?;
        let mut message: Option<MessageDescriptor> = None;
        for index in indexes {
            let next = match &message {
                None => self.main.messages().nth(index),
                Some(parent) => parent.child_messages().nth(index),
            };
            message = Some(next.ok_or_else(|| format!("no message at index {index}"))?);
        }
        Ok((message.ok_or("no message")?, rest))
    }

    /// The full name of the message a payload names (the record name strategies use it).
    pub fn record_name(&self, payload: &[u8]) -> Option<String> {
        self.message_of(payload).ok().map(|(m, _)| m.full_name().to_owned())
    }

    /// Checks a payload: message indexes naming a message of the schema, then that message.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        self.decode(payload).map(drop)
    }

    /// A payload's message (after its message indexes), decoded, bounded as
    /// [`ProtobufSchema::check_payload`] is.
    pub fn decode_message(&self, payload: &[u8]) -> Result<DynamicMessage, String> {
        self.decode(payload)
    }

    fn decode(&self, payload: &[u8]) -> Result<DynamicMessage, String> {
        let (message, bytes) = self.message_of(payload)?;
        if bytes.len() > DECODED_PAYLOAD_BYTES_MAX {
            return Err(format!("a message over {DECODED_PAYLOAD_BYTES_MAX} bytes is not decoded for validation"));
        }
        // The decoder is a library walking client bytes: a panic in it refuses the record
        // rather than failing the whole request.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| DynamicMessage::decode(message, bytes)));
        match decoded {
            Ok(Ok(message)) => Ok(message),
            Ok(Err(e)) => Err(format!("not a valid message: {e}")),
            Err(_) => Err("not a valid message: the decoder failed".into()),
        }
    }

    /// The schema file's first message: what a payload with message indexes `[0]` holds.
    pub fn first_message(&self) -> Option<prost_reflect::MessageDescriptor> {
        self.main.messages().next()
    }

    /// Whether the schema's file defines message `name` (a full name, nested ones included).
    pub fn has_message(&self, name: &str) -> bool {
        self.message_named(name).is_some()
    }

    /// The message of the schema's file named `name` (a full name, nested ones included) and
    /// the message indexes that lead to it.
    fn message_named(&self, name: &str) -> Option<(MessageDescriptor, Vec<usize>)> {
        let mut stack: Vec<(MessageDescriptor, Vec<usize>)> =
            self.main.messages().enumerate().map(|(i, m)| (m, vec![i])).collect();
        while let Some((message, path)) = stack.pop() {
            if message.full_name() == name {
                return Some((message, path));
            }
            if path.len() < MESSAGE_INDEXES_MAX {
                for (i, child) in message.child_messages().enumerate() {
                    let mut next = path.clone();
                    next.push(i);
                    stack.push((child, next));
                }
            }
        }
        None
    }

    /// A JSON value (Protobuf's JSON mapping) as message `name` of the schema's file (the
    /// first when `None`, as Confluent's REST proxy writes), after the message indexes that name
    /// it (`[0]` written as one zero byte).
    pub fn encode_json(&self, value: &serde_json::Value, name: Option<&str>) -> Result<Vec<u8>, String> {
        let (message, indexes) = match name {
            None => (self.main.messages().next().ok_or("the schema defines no message")?, vec![0]),
            Some(name) => self.message_named(name).ok_or_else(|| format!("the schema has no message {name:?}"))?,
        };
        let mut path = serde_path_to_error::Track::new();
        // A library walking client data, as in `decode`: a panic refuses the record, not the request.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            DynamicMessage::deserialize(message, serde_path_to_error::Deserializer::new(value, &mut path))
        }))
        .map_err(|_| "not a valid message: the JSON mapping failed".to_owned())?
        .map_err(|e| format!("at {}: {e}", pointer(&path.path())))?;
        let mut out = message_indexes_bytes(&indexes);
        decoded.encode(&mut out).map_err(|e| format!("encoding the message: {e}"))?;
        Ok(out)
    }

    /// A payload (message indexes, then a message) as Protobuf's JSON mapping, bounded as
    /// [`ProtobufSchema::check_payload`] is.
    pub fn decode_json(&self, payload: &[u8]) -> Result<serde_json::Value, String> {
        let message = self.decode(payload)?;
        serde_json::to_value(&message).map_err(|e| format!("writing the message as JSON: {e}"))
    }

    /// Whether this schema reads what `writer` wrote: every incompatible difference, as
    /// Confluent's registry finds them between the writer (original) and this (update),
    /// imported files' messages included.
    pub fn can_read(&self, writer: &ProtobufSchema) -> Vec<Difference> {
        let mut found = Vec::new();
        if self.file.package() != writer.file.package() {
            found.push(difference(
                "PACKAGE_CHANGED",
                "#/",
                format!("package {:?} became {:?}", writer.file.package(), self.file.package()),
            ));
        }
        let readers = user_messages(&self.pool);
        for (name, written) in user_messages(&writer.pool) {
            match readers.get(&name) {
                None => {
                    found.push(difference("MESSAGE_REMOVED", &format!("#/{name}"), format!("message {name} removed")))
                }
                Some(read) => compare_messages(&name, read, &written, &mut found),
            }
        }
        found
    }
}

/// Whether any options in the file carry extensions (custom options), which the printer and
/// the `prost_types` view of the file do not see.
fn has_custom_options(file: &FileDescriptor) -> bool {
    let custom = |options: DynamicMessage| options.extensions().next().is_some();
    let enum_custom = |e: prost_reflect::EnumDescriptor| custom(e.options()) || e.values().any(|v| custom(v.options()));
    let mut messages: Vec<MessageDescriptor> = file.messages().collect();
    while let Some(m) = messages.pop() {
        if custom(m.options())
            || m.fields().any(|f| custom(f.options()))
            || m.oneofs().any(|o| custom(o.options()))
            || m.child_enums().any(enum_custom)
        {
            return true;
        }
        messages.extend(m.child_messages());
    }
    custom(file.options())
        || file.enums().any(enum_custom)
        || file.services().any(|s| custom(s.options()) || s.methods().any(|m| custom(m.options())))
}

/// Compiles file `main` of `files` (import name to text) with the well-known files.
fn compile(files: HashMap<String, String>, main: &str) -> Result<(DescriptorPool, FileDescriptorProto), protox::Error> {
    // protox is a library walking client text: a panic in it (protox-parse 0.9 has a debug
    // assertion a malformed octal literal trips) refuses the schema, not the request.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile_unguarded(files, main))).unwrap_or_else(|_| {
        Err(protox::Error::new(std::io::Error::other("the Protobuf compiler failed on this schema")))
    })
}

fn compile_unguarded(
    files: HashMap<String, String>,
    main: &str,
) -> Result<(DescriptorPool, FileDescriptorProto), protox::Error> {
    let mut chain = ChainFileResolver::new();
    chain.add(References { files, name_bytes_left: Cell::new(limits::PROTOBUF_NAME_BYTES_MAX) });
    chain.add(BuiltinFiles);
    chain.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.include_source_info(false);
    compiler.open_file(main)?;
    let pool = compiler.descriptor_pool();
    let file = pool
        .get_file_by_name(main)
        .ok_or_else(|| protox::Error::new(std::io::Error::other("the compiled schema lost its file")))?
        .file_descriptor_proto()
        .clone();
    Ok((pool, file))
}

/// A file with what does not change its meaning taken out: JSON names protoc would give
/// anyway differ in whether they are written, and proto2 may or may not be spelled out.
/// `file` in the order Confluent's normalization gives it: imports sorted and deduplicated, and
/// in every message fields by number, real oneofs by their smallest field number (the synthetic
/// ones of proto3 `optional` fields stay after them), reserved ranges and names sorted; enum
/// values by number (aliases keep their order). Messages and enums are not reordered.
fn normalized(file: &FileDescriptorProto) -> FileDescriptorProto {
    fn message(m: &mut DescriptorProto) {
        m.field.sort_by_key(|f| f.number());
        let first_number = |i: usize| {
            let members = m.field.iter().filter(|f| f.oneof_index.and_then(|o| usize::try_from(o).ok()) == Some(i));
            let synthetic = members.clone().any(|f| f.proto3_optional());
            (synthetic, members.map(|f| f.number()).min().unwrap_or(i32::MAX), i)
        };
        let mut order: Vec<usize> = (0..m.oneof_decl.len()).collect();
        order.sort_by_key(|&i| first_number(i));
        let mut new_index = vec![0i32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = i32::try_from(new).unwrap_or(i32::MAX);
        }
        m.oneof_decl = order.iter().map(|&i| m.oneof_decl[i].clone()).collect();
        for f in &mut m.field {
            f.oneof_index =
                f.oneof_index.map(|o| usize::try_from(o).ok().and_then(|o| new_index.get(o).copied()).unwrap_or(o));
        }
        m.reserved_range.sort_by_key(|r| (r.start(), r.end()));
        m.reserved_name.sort();
        m.reserved_name.dedup();
        m.nested_type.iter_mut().for_each(message);
        m.enum_type.iter_mut().for_each(enumeration);
    }
    fn enumeration(e: &mut EnumDescriptorProto) {
        e.value.sort_by_key(|v| v.number());
        e.reserved_range.sort_by_key(|r| (r.start(), r.end()));
        e.reserved_name.sort();
        e.reserved_name.dedup();
    }
    let mut file = file.clone();
    let mut imports: Vec<(String, bool, bool)> = file
        .dependency
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            (name.clone(), file.public_dependency.contains(&i), file.weak_dependency.contains(&i))
        })
        .collect();
    imports.sort();
    imports.dedup_by(|a, b| a.0 == b.0);
    file.dependency = imports.iter().map(|(name, _, _)| name.clone()).collect();
    let indexes = |keep: fn(&(String, bool, bool)) -> bool| {
        imports.iter().enumerate().filter(|(_, i)| keep(i)).map(|(n, _)| i32::try_from(n).unwrap_or(i32::MAX)).collect()
    };
    file.public_dependency = indexes(|i| i.1);
    file.weak_dependency = indexes(|i| i.2);
    file.message_type.iter_mut().for_each(message);
    file.enum_type.iter_mut().for_each(enumeration);
    file
}

fn comparable(file: &FileDescriptorProto) -> FileDescriptorProto {
    fn clear(messages: &mut [DescriptorProto]) {
        for m in messages {
            for f in &mut m.field {
                if f.json_name.as_deref() == Some(print::default_json_name(f.name()).as_str()) {
                    f.json_name = None;
                }
            }
            clear(&mut m.nested_type);
        }
    }
    let mut file = file.clone();
    file.source_code_info = None;
    if file.syntax() == "proto2" {
        file.syntax = None;
    }
    clear(&mut file.message_type);
    file
}

fn difference(kind: &'static str, path: &str, description: String) -> Difference {
    Difference { kind, path: path.to_owned(), description }
}

/// A serde path (`address.lines[2]`) as a JSON pointer (`/address/lines/2`), as the other
/// formats' errors name places.
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        out.push('/');
        match segment {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out.push_str(&key.replace('~', "~0").replace('/', "~1"))
            }
            Segment::Unknown => out.push('?'),
        }
    }
    if out.is_empty() { "/".into() } else { out }
}

/// Message indexes as Confluent's serializers write them: `[0]` as one zero byte, others as a
/// count and the indexes, each a zigzag varint.
fn message_indexes_bytes(indexes: &[usize]) -> Vec<u8> {
    if indexes == [0] {
        return vec![0];
    }
    let mut out = Vec::with_capacity(indexes.len() + 1);
    for n in std::iter::once(indexes.len()).chain(indexes.iter().copied()) {
        // Indexes are bounded by MESSAGE_INDEXES_MAX and by a file's message count, so far from
        // overflowing when doubled.
        let mut zigzag = (n as u64) << 1;
        while zigzag >= 0x80 {
            out.push((zigzag as u8) | 0x80);
            zigzag >>= 7;
        }
        out.push(zigzag as u8);
    }
    out
}

/// Confluent's message indexes: a zig-zag varint count (0 means `[0]`), then each index.
fn message_indexes(payload: &[u8]) -> Result<(Vec<usize>, &[u8]), String> {
    let mut at = 0;
    let mut next = || -> Result<i64, String> {
        let mut raw: u64 = 0;
        for i in 0..5 {
            let byte = *payload.get(at).ok_or("the message indexes end early")?;
            at += 1;
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err("a message index longer than 5 bytes".into())
    };
    let count = next()?;
    let indexes = if count == 0 {
        vec![0]
    } else {
        let count = usize::try_from(count).ok().filter(|c| *c <= MESSAGE_INDEXES_MAX);
        let count = count.ok_or_else(|| format!("{count:?} message indexes (at most {MESSAGE_INDEXES_MAX})"))?;
        (0..count)
            .map(|_| next().and_then(|i| usize::try_from(i).map_err(|_| format!("message index {i}"))))
            .collect::<Result<Vec<_>, _>>()?
    };
    Ok((indexes, &payload[at..]))
}

/// Every message of the schema and its imports but the well-known files, by full name; map
/// entries are compared as their fields' key and value, not as messages.
fn user_messages(pool: &DescriptorPool) -> BTreeMap<String, MessageDescriptor> {
    pool.all_messages()
        .filter(|m| !m.is_map_entry() && !m.parent_file().name().starts_with("google/protobuf/"))
        .map(|m| (m.full_name().to_owned(), m))
        .collect()
}

/// Which wire-compatible group a scalar kind is in: changing within a group keeps old data
/// readable (Confluent's FIELD_SCALAR_KIND_CHANGED is only across groups; enums are varints).
fn scalar_group(kind: &Kind) -> Option<u8> {
    Some(match kind {
        Kind::Int32 | Kind::Uint32 | Kind::Int64 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => 1,
        Kind::Sint32 | Kind::Sint64 => 2,
        Kind::Fixed32 | Kind::Sfixed32 => 3,
        Kind::Fixed64 | Kind::Sfixed64 => 4,
        Kind::String | Kind::Bytes => 5,
        Kind::Float => 6,
        Kind::Double => 7,
        Kind::Message(_) => return None,
    })
}

fn is_numeric(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

/// A field's label as written: proto2 always states one; proto3 only `repeated` and
/// `optional` (Confluent compares labels only where both are written).
fn written_label(field: &FieldDescriptor) -> Option<Cardinality> {
    let proto3 = field.parent_file().syntax() == Syntax::Proto3;
    match field.cardinality() {
        Cardinality::Optional if proto3 && !field.field_descriptor_proto().proto3_optional() => None,
        c => Some(c),
    }
}

/// The real (not proto3-optional) oneof a field is in.
fn real_oneof(field: &FieldDescriptor) -> Option<String> {
    field.containing_oneof().filter(|o| !o.is_synthetic()).map(|o| o.name().to_owned())
}

fn compare_messages(name: &str, read: &MessageDescriptor, written: &MessageDescriptor, found: &mut Vec<Difference>) {
    let read_fields: BTreeMap<u32, FieldDescriptor> = read.fields().map(|f| (f.number(), f)).collect();
    let written_fields: BTreeMap<u32, FieldDescriptor> = written.fields().map(|f| (f.number(), f)).collect();
    // Sets: a message may have thousands of oneofs, each looked up once per field.
    let read_oneofs: HashSet<String> =
        read.oneofs().filter(|o| !o.is_synthetic()).map(|o| o.name().to_owned()).collect();
    let path = |number: u32| format!("#/{name}/{number}");
    for (number, w) in &written_fields {
        match read_fields.get(number) {
            None if w.cardinality() == Cardinality::Required => found.push(difference(
                "REQUIRED_FIELD_REMOVED",
                &path(*number),
                format!("required field {} ({number}) of {name} removed", w.name()),
            )),
            // Removing a whole oneof is compatible; a member of one that stays is not.
            None if real_oneof(w).is_some_and(|o| read_oneofs.contains(&o)) => found.push(difference(
                "ONEOF_FIELD_REMOVED",
                &path(*number),
                format!("field {} ({number}) removed from a oneof of {name}", w.name()),
            )),
            None => {}
            Some(r) => compare_fields(name, r, w, found),
        }
    }
    for (number, r) in &read_fields {
        if !written_fields.contains_key(number) && r.cardinality() == Cardinality::Required {
            found.push(difference(
                "REQUIRED_FIELD_ADDED",
                &path(*number),
                format!("required field {} ({number}) added to {name}", r.name()),
            ));
        }
    }
    // Fields that were outside any oneof and are now in one.
    let written_oneofs: HashSet<String> =
        written.oneofs().filter(|o| !o.is_synthetic()).map(|o| o.name().to_owned()).collect();
    let mut moved: BTreeMap<String, usize> = BTreeMap::new();
    for (number, r) in &read_fields {
        let Some(w) = written_fields.get(number) else { continue };
        if let (Some(oneof), None) = (real_oneof(r), real_oneof(w)) {
            if written_oneofs.contains(&oneof) {
                found.push(difference(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    &path(*number),
                    format!("field {} ({number}) of {name} moved into the existing oneof {oneof}", r.name()),
                ));
            } else {
                *moved.entry(oneof).or_default() += 1;
            }
        }
    }
    for (oneof, count) in moved {
        if count > 1 {
            found.push(difference(
                "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
                &format!("#/{name}/{oneof}"),
                format!("{count} fields of {name} moved into the new oneof {oneof}"),
            ));
        }
    }
}

fn compare_fields(name: &str, r: &FieldDescriptor, w: &FieldDescriptor, found: &mut Vec<Difference>) {
    let path = format!("#/{name}/{}", r.number());
    if r.is_map() != w.is_map() {
        found.push(difference(
            "FIELD_KIND_CHANGED",
            &path,
            format!("field {} of {name} changed to or from a map", r.name()),
        ));
        return;
    }
    let pairs: Vec<(Kind, Kind)> = match (r.kind(), w.kind()) {
        (Kind::Message(rm), Kind::Message(wm)) if r.is_map() => vec![
            (rm.map_entry_key_field().kind(), wm.map_entry_key_field().kind()),
            (rm.map_entry_value_field().kind(), wm.map_entry_value_field().kind()),
        ],
        kinds => vec![kinds],
    };
    for (rk, wk) in pairs {
        match (scalar_group(&rk), scalar_group(&wk)) {
            (None, None) => {
                if let (Kind::Message(rm), Kind::Message(wm)) = (&rk, &wk)
                    && rm.full_name() != wm.full_name()
                {
                    found.push(difference(
                        "FIELD_NAMED_TYPE_CHANGED",
                        &path,
                        format!(
                            "field {} of {name} changed type from {} to {}",
                            r.name(),
                            wm.full_name(),
                            rm.full_name()
                        ),
                    ));
                }
            }
            (Some(rg), Some(wg)) if rg != wg => found.push(difference(
                "FIELD_SCALAR_KIND_CHANGED",
                &path,
                format!("field {} of {name} changed from {wk:?} to {rk:?}", r.name()),
            )),
            (Some(_), Some(_)) => {}
            _ => found.push(difference(
                "FIELD_KIND_CHANGED",
                &path,
                format!("field {} of {name} changed between a scalar and a message", r.name()),
            )),
        }
    }
    if !r.is_map()
        && is_numeric(&r.kind())
        && let (Some(rl), Some(wl)) = (written_label(r), written_label(w))
        && rl != wl
    {
        found.push(difference(
            "FIELD_NUMERIC_LABEL_CHANGED",
            &path,
            format!("the label of numeric field {} of {name} changed", r.name()),
        ));
    }
}

#[cfg(test)]
mod tests;
