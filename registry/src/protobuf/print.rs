//! Writes a compiled `FileDescriptorProto` back as `.proto` text: the canonical text of a
//! Protobuf schema. Type names are written fully qualified, fields in declaration order, map
//! fields as their entry messages. What
//! this printer does not write (groups, extensions, custom options) is caught by the caller,
//! which keeps the text only if compiling it gives the same descriptor again.

use std::fmt::Write;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto, ServiceDescriptorProto,
};

/// Field numbers end below 2^29; a range ending there is written `max`.
const FIELD_NUMBER_END: i32 = 1 << 29;

/// The `.proto` text of `file`, or `None` when it holds something the printer does not write.
pub(super) fn proto_text(file: &FileDescriptorProto) -> Option<String> {
    if !file.extension.is_empty() {
        return None;
    }
    let mut out = String::new();
    match file.syntax() {
        "" | "proto2" => out.push_str("syntax = \"proto2\";\n"),
        "proto3" => out.push_str("syntax = \"proto3\";\n"),
        _ => return None,
    }
    if !file.package().is_empty() {
        let _ = writeln!(out, "package {};", file.package());
    }
    for (i, import) in file.dependency.iter().enumerate() {
        let index = i32::try_from(i).ok()?;
        let kind = if file.public_dependency.contains(&index) {
            "public "
        } else if file.weak_dependency.contains(&index) {
            "weak "
        } else {
            ""
        };
        let _ = writeln!(out, "import {kind}{};", quote(import));
    }
    if let Some(o) = &file.options {
        let strings = [
            ("java_package", &o.java_package),
            ("java_outer_classname", &o.java_outer_classname),
            ("go_package", &o.go_package),
            ("objc_class_prefix", &o.objc_class_prefix),
            ("csharp_namespace", &o.csharp_namespace),
            ("swift_prefix", &o.swift_prefix),
            ("php_class_prefix", &o.php_class_prefix),
            ("php_namespace", &o.php_namespace),
            ("php_metadata_namespace", &o.php_metadata_namespace),
            ("ruby_package", &o.ruby_package),
        ];
        for (name, value) in strings {
            if let Some(v) = value {
                let _ = writeln!(out, "option {name} = {};", quote(v));
            }
        }
        let bools = [
            ("java_multiple_files", o.java_multiple_files),
            ("java_string_check_utf8", o.java_string_check_utf8),
            ("cc_enable_arenas", o.cc_enable_arenas),
            ("deprecated", o.deprecated),
        ];
        for (name, value) in bools {
            if let Some(v) = value {
                let _ = writeln!(out, "option {name} = {v};");
            }
        }
        if o.optimize_for.is_some() {
            let _ = writeln!(out, "option optimize_for = {};", o.optimize_for().as_str_name());
        }
    }
    let proto3 = file.syntax() == "proto3";
    for message in &file.message_type {
        write_message(&mut out, message, 0, proto3)?;
    }
    for e in &file.enum_type {
        write_enum(&mut out, e, 0);
    }
    for service in &file.service {
        write_service(&mut out, service);
    }
    Some(out)
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\{:03o}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn scalar_name(t: Type) -> Option<&'static str> {
    Some(match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        Type::Group | Type::Message | Type::Enum => return None,
    })
}

fn type_of(field: &FieldDescriptorProto) -> Option<String> {
    match field.r#type() {
        Type::Group => None,
        Type::Message | Type::Enum => Some(field.type_name().to_owned()),
        t => scalar_name(t).map(str::to_owned),
    }
}

fn field_options(field: &FieldDescriptorProto) -> String {
    let mut options = Vec::new();
    if let Some(o) = &field.options {
        if let Some(packed) = o.packed {
            options.push(format!("packed = {packed}"));
        }
        if let Some(deprecated) = o.deprecated {
            options.push(format!("deprecated = {deprecated}"));
        }
        if let Some(lazy) = o.lazy {
            options.push(format!("lazy = {lazy}"));
        }
    }
    if let Some(default) = &field.default_value {
        let value = match field.r#type() {
            Type::String | Type::Bytes => quote(default),
            _ => default.clone(),
        };
        options.push(format!("default = {value}"));
    }
    if let Some(json_name) = &field.json_name
        && *json_name != default_json_name(field.name())
    {
        options.push(format!("json_name = {}", quote(json_name)));
    }
    if options.is_empty() { String::new() } else { format!(" [{}]", options.join(", ")) }
}

/// protoc's default JSON name: underscores dropped, the letter after each one upper-cased.
pub(super) fn default_json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn write_field(
    out: &mut String,
    field: &FieldDescriptorProto,
    depth: usize,
    proto3: bool,
    in_oneof: bool,
) -> Option<()> {
    indent(out, depth);
    let label = match field.label() {
        _ if in_oneof => "",
        Label::Repeated => "repeated ",
        Label::Required => "required ",
        Label::Optional if proto3 && field.proto3_optional() => "optional ",
        Label::Optional if proto3 => "",
        Label::Optional => "optional ",
    };
    let _ = writeln!(out, "{label}{} {} = {}{};", type_of(field)?, field.name(), field.number(), field_options(field));
    Some(())
}

fn write_ranges(out: &mut String, depth: usize, keyword: &str, ranges: impl Iterator<Item = (i32, i32)>) {
    let ranges: Vec<String> = ranges
        .map(|(start, end)| match end.saturating_sub(1) {
            last if last == start => start.to_string(),
            _ if end >= FIELD_NUMBER_END => format!("{start} to max"),
            last => format!("{start} to {last}"),
        })
        .collect();
    if !ranges.is_empty() {
        indent(out, depth);
        let _ = writeln!(out, "{keyword} {};", ranges.join(", "));
    }
}

fn write_reserved_names(out: &mut String, depth: usize, names: &[String]) {
    if !names.is_empty() {
        indent(out, depth);
        let quoted: Vec<String> = names.iter().map(|n| quote(n)).collect();
        let _ = writeln!(out, "reserved {};", quoted.join(", "));
    }
}

fn write_message(out: &mut String, message: &DescriptorProto, depth: usize, proto3: bool) -> Option<()> {
    if !message.extension.is_empty() {
        return None;
    }
    indent(out, depth);
    let _ = writeln!(out, "message {} {{", message.name());
    if let Some(o) = &message.options {
        // Map fields are written as their entry message and a repeated field of it, as the
        // descriptor has them: Confluent's Java serializers count entry messages in message
        // indexes, and read them from the stored text.
        if o.map_entry.is_some() {
            indent(out, depth + 1);
            let _ = writeln!(out, "option map_entry = {};", o.map_entry());
        }
        if o.deprecated.is_some() {
            indent(out, depth + 1);
            let _ = writeln!(out, "option deprecated = {};", o.deprecated());
        }
    }
    let mut oneofs_written = vec![false; message.oneof_decl.len()];
    for field in &message.field {
        let oneof = field.oneof_index.and_then(|i| usize::try_from(i).ok()).filter(|_| !field.proto3_optional());
        match oneof {
            None => write_field(out, field, depth + 1, proto3, false)?,
            Some(i) if oneofs_written.get(i) == Some(&false) => {
                oneofs_written[i] = true;
                indent(out, depth + 1);
                let _ = writeln!(out, "oneof {} {{", message.oneof_decl.get(i)?.name());
                for member in message.field.iter().filter(|f| f.oneof_index == field.oneof_index) {
                    write_field(out, member, depth + 2, proto3, true)?;
                }
                indent(out, depth + 1);
                out.push_str("}\n");
            }
            Some(_) => {}
        }
    }
    for nested in &message.nested_type {
        write_message(out, nested, depth + 1, proto3)?;
    }
    for e in &message.enum_type {
        write_enum(out, e, depth + 1);
    }
    write_ranges(out, depth + 1, "extensions", message.extension_range.iter().map(|r| (r.start(), r.end())));
    write_ranges(out, depth + 1, "reserved", message.reserved_range.iter().map(|r| (r.start(), r.end())));
    write_reserved_names(out, depth + 1, &message.reserved_name);
    indent(out, depth);
    out.push_str("}\n");
    Some(())
}

fn write_enum(out: &mut String, e: &EnumDescriptorProto, depth: usize) {
    indent(out, depth);
    let _ = writeln!(out, "enum {} {{", e.name());
    if let Some(o) = &e.options {
        if o.allow_alias.is_some() {
            indent(out, depth + 1);
            let _ = writeln!(out, "option allow_alias = {};", o.allow_alias());
        }
        if o.deprecated.is_some() {
            indent(out, depth + 1);
            let _ = writeln!(out, "option deprecated = {};", o.deprecated());
        }
    }
    for value in &e.value {
        indent(out, depth + 1);
        let deprecated = value.options.as_ref().and_then(|o| o.deprecated);
        let options = deprecated.map_or(String::new(), |d| format!(" [deprecated = {d}]"));
        let _ = writeln!(out, "{} = {}{options};", value.name(), value.number());
    }
    // Enum reserved ranges are inclusive at both ends.
    write_ranges(out, depth + 1, "reserved", e.reserved_range.iter().map(|r| (r.start(), r.end().saturating_add(1))));
    write_reserved_names(out, depth + 1, &e.reserved_name);
    indent(out, depth);
    out.push_str("}\n");
}

fn write_service(out: &mut String, service: &ServiceDescriptorProto) {
    let _ = writeln!(out, "service {} {{", service.name());
    for method in &service.method {
        let stream = |yes: bool| if yes { "stream " } else { "" };
        let _ = writeln!(
            out,
            "  rpc {}({}{}) returns ({}{});",
            method.name(),
            stream(method.client_streaming()),
            method.input_type(),
            stream(method.server_streaming()),
            method.output_type()
        );
    }
    out.push_str("}\n");
}
