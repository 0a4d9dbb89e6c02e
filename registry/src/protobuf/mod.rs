//! Protobuf schemas: `.proto` text or a base64 `FileDescriptorProto` (what confluent-kafka's
//! Python serializer registers), compiled without protoc (protox) against the schema's
//! references (its imports, by name) and the well-known `google/protobuf/*.proto` files; the
//! canonical text ids are given for; payload checks with Confluent's message indexes; and
//! compatibility in the terms of Confluent's Protobuf differences.

mod print;

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::{Difference, SchemaError};

/// The file name a schema registered as text is compiled under (its imports name others).
const MAIN_FILE: &str = "default.proto";
/// Message indexes a payload may carry (nesting depth of the message it names).
const MESSAGE_INDEXES_MAX: usize = 64;

/// A compiled Protobuf schema.
pub struct ProtobufSchema {
    pool: DescriptorPool,
    file: FileDescriptorProto,
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

/// A schema text as a protox file: `.proto` source, else a base64 `FileDescriptorProto`.
fn file_of(name: &str, text: &str) -> Result<File, protox::Error> {
    match File::from_source(name, text) {
        Ok(file) => Ok(file),
        Err(source_error) => {
            let Ok(bytes) = BASE64.decode(text.trim()) else { return Err(source_error) };
            let mut file = FileDescriptorProto::decode(bytes.as_slice()).map_err(protox::Error::new)?;
            if file.name().is_empty() {
                file.name = Some(name.to_owned());
            }
            Ok(File::from_file_descriptor_proto(file))
        }
    }
}

/// The schema's references by import name, then the well-known files.
struct References(HashMap<String, String>);

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(text) => file_of(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

impl ProtobufSchema {
    /// Compiles `text` with its references, each (import name, text).
    pub fn parse(text: &str, references: &[(&str, &str)]) -> Result<Self, SchemaError> {
        let main = file_of(MAIN_FILE, text).map_err(invalid)?;
        let main_name = main.name().to_owned();
        if references.iter().any(|(name, _)| *name == main_name) {
            return Err(invalid(format!("the schema's file name {main_name} is also a reference's")));
        }
        let mut files: HashMap<String, String> =
            references.iter().map(|(name, text)| ((*name).to_owned(), (*text).to_owned())).collect();
        files.insert(main_name.clone(), text.to_owned());
        let (pool, file) = compile(files.clone(), &main_name).map_err(invalid)?;
        // The printed text is the canonical one only if it compiles back to the same file.
        let printed = print::proto_text(&file).filter(|printed| {
            files.insert(main_name.clone(), printed.clone());
            compile(files, &main_name).is_ok_and(|(_, again)| comparable(&again) == comparable(&file))
        });
        let canonical = printed.unwrap_or_else(|| BASE64.encode(comparable(&file).encode_to_vec()));
        Ok(Self { pool, file, canonical })
    }

    /// `.proto` text printed from the compiled file (so a text and a base64 registration of
    /// one file are one id), or the base64 descriptor where the printer cannot reproduce it.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The file as a base64 `FileDescriptorProto`: what `format=serialized` answers.
    pub fn serialized(&self) -> String {
        BASE64.encode(self.file.encode_to_vec())
    }

    /// The message a payload's message indexes name, and the payload after them.
    fn message_of<'p>(&self, payload: &'p [u8]) -> Result<(MessageDescriptor, &'p [u8]), String> {
        let (indexes, rest) = message_indexes(payload)?;
        let file = self.pool.get_file_by_name(self.file.name()).ok_or("the schema lost its file")?;
        let mut message: Option<MessageDescriptor> = None;
        for index in indexes {
            let next = match &message {
                None => file.messages().nth(index),
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
        let (message, bytes) = self.message_of(payload)?;
        DynamicMessage::decode(message, bytes).map(|_| ()).map_err(|e| format!("not a valid message: {e}"))
    }

    /// Whether this schema reads what `writer` wrote: every incompatible difference, as
    /// Confluent's registry finds them between the writer (original) and this (update).
    pub fn can_read(&self, writer: &ProtobufSchema) -> Vec<Difference> {
        let mut found = Vec::new();
        if self.file.package() != writer.file.package() {
            found.push(difference(
                "PACKAGE_CHANGED",
                "#/",
                format!("package {:?} became {:?}", writer.file.package(), self.file.package()),
            ));
        }
        let readers = messages_by_name(&self.file);
        for (name, written) in messages_by_name(&writer.file) {
            match readers.get(&name) {
                None => {
                    found.push(difference("MESSAGE_REMOVED", &format!("#/{name}"), format!("message {name} removed")))
                }
                Some(read) => compare_messages(&name, read, written, &mut found),
            }
        }
        found
    }
}

/// Compiles file `main` of `files` (import name to text) with the well-known files.
fn compile(files: HashMap<String, String>, main: &str) -> Result<(DescriptorPool, FileDescriptorProto), protox::Error> {
    let mut chain = ChainFileResolver::new();
    chain.add(References(files));
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
fn comparable(file: &FileDescriptorProto) -> FileDescriptorProto {
    fn clear(messages: &mut [DescriptorProto]) {
        for m in messages {
            for f in &mut m.field {
                f.json_name = None;
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

/// Every message of a file, nested ones included, by full name (without the leading dot).
fn messages_by_name(file: &FileDescriptorProto) -> HashMap<String, &DescriptorProto> {
    fn walk<'a>(prefix: &str, messages: &'a [DescriptorProto], out: &mut HashMap<String, &'a DescriptorProto>) {
        for m in messages {
            let name = if prefix.is_empty() { m.name().to_owned() } else { format!("{prefix}.{}", m.name()) };
            walk(&name, &m.nested_type, out);
            out.insert(name, m);
        }
    }
    let mut out = HashMap::new();
    walk(file.package(), &file.message_type, &mut out);
    out
}

/// Which wire-compatible group a scalar type is in: changing within a group keeps old data
/// readable (Confluent's FIELD_SCALAR_KIND_CHANGED is only across groups).
fn scalar_group(t: Type) -> u8 {
    match t {
        Type::Int32 | Type::Uint32 | Type::Int64 | Type::Uint64 | Type::Bool => 1,
        Type::Sint32 | Type::Sint64 => 2,
        Type::Fixed32 | Type::Sfixed32 => 3,
        Type::Fixed64 | Type::Sfixed64 => 4,
        Type::String | Type::Bytes => 5,
        Type::Float => 6,
        Type::Double => 7,
        Type::Enum => 8,
        Type::Message | Type::Group => 9,
    }
}

fn is_numeric(t: Type) -> bool {
    !matches!(t, Type::String | Type::Bytes | Type::Message | Type::Group)
}

/// The real (not proto3-optional) oneof a field is in.
fn real_oneof(message: &DescriptorProto, field: &FieldDescriptorProto) -> Option<String> {
    if field.proto3_optional() {
        return None;
    }
    let index = usize::try_from(field.oneof_index?).ok()?;
    message.oneof_decl.get(index).map(|o| o.name().to_owned())
}

fn compare_messages(name: &str, read: &DescriptorProto, written: &DescriptorProto, found: &mut Vec<Difference>) {
    let read_fields: HashMap<i32, &FieldDescriptorProto> = read.field.iter().map(|f| (f.number(), f)).collect();
    let written_fields: HashMap<i32, &FieldDescriptorProto> = written.field.iter().map(|f| (f.number(), f)).collect();
    let path = |number: i32| format!("#/{name}/{number}");
    for (number, w) in &written_fields {
        match read_fields.get(number) {
            None if w.label() == Label::Required => found.push(difference(
                "REQUIRED_FIELD_REMOVED",
                &path(*number),
                format!("required field {} ({number}) of {name} removed", w.name()),
            )),
            None if real_oneof(written, w).is_some() => found.push(difference(
                "ONEOF_FIELD_REMOVED",
                &path(*number),
                format!("field {} ({number}) removed from a oneof of {name}", w.name()),
            )),
            None => {}
            Some(r) => compare_fields(name, r, w, found),
        }
    }
    for (number, r) in &read_fields {
        if !written_fields.contains_key(number) && r.label() == Label::Required {
            found.push(difference(
                "REQUIRED_FIELD_ADDED",
                &path(*number),
                format!("required field {} ({number}) added to {name}", r.name()),
            ));
        }
    }
    // Fields that were outside any oneof and are now in one.
    let mut moved: HashMap<String, usize> = HashMap::new();
    for (number, r) in &read_fields {
        let Some(w) = written_fields.get(number) else { continue };
        if let (Some(oneof), None) = (real_oneof(read, r), real_oneof(written, w)) {
            let existed = written.oneof_decl.iter().any(|o| o.name() == oneof);
            if existed {
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

fn compare_fields(name: &str, r: &FieldDescriptorProto, w: &FieldDescriptorProto, found: &mut Vec<Difference>) {
    let path = format!("#/{name}/{}", r.number());
    let (rt, wt) = (r.r#type(), w.r#type());
    let named = |t: Type| matches!(t, Type::Message | Type::Group | Type::Enum);
    if named(rt) != named(wt) || (named(rt) && (rt == Type::Enum) != (wt == Type::Enum)) {
        found.push(difference(
            "FIELD_KIND_CHANGED",
            &path,
            format!("field {} of {name} changed between scalar, enum and message", r.name()),
        ));
        return;
    }
    if named(rt) {
        if r.type_name() != w.type_name() {
            found.push(difference(
                "FIELD_NAMED_TYPE_CHANGED",
                &path,
                format!("field {} of {name} changed type from {} to {}", r.name(), w.type_name(), r.type_name()),
            ));
        }
    } else if scalar_group(rt) != scalar_group(wt) {
        found.push(difference(
            "FIELD_SCALAR_KIND_CHANGED",
            &path,
            format!("field {} of {name} changed from {} to {}", r.name(), wt.as_str_name(), rt.as_str_name()),
        ));
    }
    let repeated = |f: &FieldDescriptorProto| f.label() == Label::Repeated;
    if is_numeric(rt) && repeated(r) != repeated(w) {
        found.push(difference(
            "FIELD_NUMERIC_LABEL_CHANGED",
            &path,
            format!("numeric field {} of {name} changed between repeated and singular", r.name()),
        ));
    }
}

#[cfg(test)]
mod tests;
