//! JSON Schemas: parsing and validation (the `jsonschema` crate, drafts 4 to 2020-12, draft 7
//! when `$schema` is absent, as Confluent's registry assumes), the canonical text ids are given
//! for, and a compatibility check of a reader schema against a writer schema in the terms of
//! Confluent's JSON Schema differences.
//!
//! References are other subjects' schemas, each known by the name a `$ref` uses; nothing is
//! ever fetched (a `$ref` to anything else fails to parse).
//!
//! The compatibility check asks whether every instance the writer accepts is accepted by the
//! reader. Keywords it does not model (`if`/`then`/`else`, `patternProperties`, `dependencies`,
//! `not` and others) must be equal in both, or the change is reported: it never calls a change
//! compatible without knowing.

use std::collections::{BTreeSet, HashMap, HashSet};

use jsonschema::Draft;
use serde_json::{Map, Value};

use crate::{Difference, SchemaError, limits};

mod cost;

/// Backtracking steps a `pattern` may take on one value before the match fails.
const PATTERN_BACKTRACK_MAX: usize = 10_000;

/// A parsed JSON Schema with its references.
pub struct JsonSchema {
    root: Value,
    /// The references' schemas by the URI a `$ref` reaches them at.
    references: Vec<(String, Value)>,
    validator: jsonschema::Validator,
    /// What validating an instance costs ([`cost`]), counted before the validator runs.
    cost: cost::CostGraph,
    canonical: String,
    /// Memory its compiled patterns take, measured ([`compiled_pattern_bytes`]).
    pattern_bytes: usize,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSchema").field("canonical", &self.canonical).finish()
    }
}

fn invalid(why: impl std::fmt::Display) -> SchemaError {
    SchemaError::Invalid(format!("Invalid schema: {why}"))
}

impl JsonSchema {
    /// Parses `text`; `references` are (name, text) of the schemas it may `$ref` by name.
    pub fn parse(text: &str, references: &[(&str, &str)]) -> Result<Self, SchemaError> {
        let root: Value = serde_json::from_str(text).map_err(invalid)?;
        if !root.is_object() && !root.is_boolean() {
            return Err(invalid("a JSON Schema is an object or a boolean"));
        }
        let draft = draft_of(&root)?;
        let base = root.get("$id").and_then(Value::as_str).unwrap_or("json-schema:///");
        let base = jsonschema::uri::from_str(base).map_err(invalid)?;
        let mut resolved = Vec::with_capacity(references.len());
        let mut draft4 = vec![draft == Draft::Draft4];
        let mut registry = jsonschema::Registry::new().draft(draft);
        for (name, text) in references {
            let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("reference {name}: {e}")))?;
            let uri = jsonschema::uri::resolve_against(&base.borrow(), name).map_err(invalid)?;
            let reference_draft = draft_of(&value)?;
            draft4.push(reference_draft == Draft::Draft4);
            registry = registry.add(uri.as_str(), reference_draft.create_resource(value.clone())).map_err(invalid)?;
            resolved.push((uri.as_str().trim_end_matches('#').to_owned(), value));
        }
        // Before the validator compiles them.
        let pattern_bytes = check_patterns(std::iter::once(&root).chain(resolved.iter().map(|(_, value)| value)))?;
        let registry = registry.prepare().map_err(invalid)?;
        let patterns = jsonschema::PatternOptions::fancy_regex()
            // Patterns with look-around backtrack: bounded, since every produced record may be
            // matched against them.
            .backtrack_limit(PATTERN_BACKTRACK_MAX)
            // Compiled patterns are kept with the parsed schema in every agent's cache.
            .size_limit(limits::JSON_PATTERN_BYTES_MAX)
            .dfa_size_limit(limits::JSON_PATTERN_CACHE_BYTES_MAX);
        let validator = jsonschema::options()
            .with_pattern_options(patterns)
            .with_draft(draft)
            .with_registry(&registry)
            .offline()
            .build(&root)
            .map_err(|e| invalid(e.to_string()))?;
        let cost = cost::CostGraph::build(&root, base.as_str(), &resolved, &draft4)?;
        let mut canonical = String::with_capacity(text.len());
        write_canonical(&root, &mut canonical);
        Ok(Self { root, references: resolved, validator, cost, canonical, pattern_bytes })
    }

    /// Compact JSON with object keys sorted: equal schemas written differently (whitespace,
    /// key order) get one text, so one id.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// Memory the schema's compiled patterns take (each measured as the `regex` crate builds
    /// it, with a first matching cache): what a cache of parsed schemas must weigh
    /// besides the text, since a pattern of a few bytes may compile to a megabyte.
    pub fn pattern_bytes(&self) -> usize {
        self.pattern_bytes
    }

    /// The schema document.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// The schema's `title`, which Confluent's serializers use as the record name.
    pub fn title(&self) -> Option<String> {
        self.root.get("title").and_then(Value::as_str).map(str::to_owned)
    }

    /// Checks that `bytes` is one JSON document this schema accepts.
    pub fn check_instance(&self, bytes: &[u8]) -> Result<(), String> {
        let instance: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        self.check_value(&instance)
    }

    /// Checks a JSON value against the schema, within the steps its size allows
    /// ([`limits::JSON_VALIDATION_STEPS_BASE`]): past them it is refused unchecked.
    pub fn check_value(&self, instance: &Value) -> Result<(), String> {
        self.cost.check(instance)?;
        // Masked: the message names the rule and the place, without quoting the record.
        self.validator.validate(instance).map_err(|e| format!("{} at '{}'", e.masked(), e.instance_path()))
    }

    /// Whether everything `writer` accepts is accepted by this schema: empty when it is, else
    /// every difference found.
    pub fn can_read(&self, writer: &JsonSchema) -> Vec<Difference> {
        // One schema reads what it writes, whatever the comparison below could not follow (a
        // `$ref` to nowhere under a keyword the validator ignores, found by the schema_text
        // fuzz target, was reported as a difference with itself).
        if self.root == writer.root && self.references == writer.references {
            return Vec::new();
        }
        let mut check = Check {
            reader: self,
            writer,
            seen: HashSet::new(),
            compared: HashMap::new(),
            cycles_met: 0,
            quiet: 0,
            differences_met: 0,
            found: Vec::new(),
            work_left: WORK_MAX,
            depth: 0,
        };
        check.compare(Node::root(&self.root), Node::root(&writer.root), "#");
        if check.work_left == 0 {
            // What was found before the cut may be the cut's doing (a union branch left unread).
            check.found.clear();
            check.found.push(Difference {
                kind: "SCHEMA_TOO_COMPLEX",
                path: "#".into(),
                description: format!("comparing the schemas needs more than {WORK_MAX} steps"),
            });
        }
        check.found
    }

    /// The schema a `$ref` names, and the document it lives in.
    fn resolve<'a>(&'a self, node: Node<'a>, reference: &str) -> Option<Node<'a>> {
        let (document, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let doc = if document.is_empty() {
            node.doc
        } else {
            let name = jsonschema::uri::from_str(document).ok()?;
            let base_id = self.root.get("$id").and_then(Value::as_str).unwrap_or("json-schema:///");
            let base = jsonschema::uri::from_str(base_id).ok()?;
            let against = jsonschema::uri::resolve_against(&base.borrow(), document).ok()?;
            self.references.iter().find(|(uri, _)| uri == name.as_str() || uri == against.as_str()).map(|(_, v)| v)?
        };
        let value = if pointer.is_empty() { doc } else { doc.pointer(pointer)? };
        Some(Node { value, doc })
    }
}

/// Refuses regular expressions whose compilation has no bound: more than
/// [`limits::JSON_PATTERNS_MAX`] distinct ones (`pattern` values, `patternProperties` names) in
/// the schema and its references, or subroutine calls (`\g<1>`) in a pattern the backtracking
/// engine gets: fancy-regex inlines each call as a copy of its group when it compiles, up to 19
/// deep, so a group calling itself three times is 3^19 copies.
fn check_patterns<'v>(documents: impl Iterator<Item = &'v Value>) -> Result<usize, SchemaError> {
    let mut patterns: HashSet<&str> = HashSet::new();
    let mut stack: Vec<&Value> = documents.collect();
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(keywords) => {
                for (keyword, child) in keywords {
                    match (keyword.as_str(), child) {
                        ("pattern", Value::String(pattern)) => {
                            patterns.insert(pattern.as_str());
                        }
                        ("patternProperties", Value::Object(schemas)) => {
                            patterns.extend(schemas.keys().map(String::as_str));
                            stack.extend(schemas.values());
                        }
                        (keyword, _) if cost::INSTANCE_KEYWORDS.contains(&keyword) => {}
                        _ => stack.push(child),
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    if patterns.len() > limits::JSON_PATTERNS_MAX {
        return Err(invalid(format!(
            "{} distinct patterns, more than {} (each is compiled and kept)",
            patterns.len(),
            limits::JSON_PATTERNS_MAX
        )));
    }
    // Only a pattern handed to fancy-regex as written can hold one: the others are translated to
    // the `regex` crate's syntax, which has no subroutines.
    let calls = |pattern: &str| fancy_regex::Expr::parse_tree(pattern).is_ok_and(|tree| tree.contains_subroutines);
    match patterns.iter().find(|&&p| cost::Engine::of(p) == cost::Engine::Backtracking && calls(p)) {
        Some(pattern) => {
            let shown: String = pattern.chars().take(64).collect();
            Err(invalid(format!("the pattern {shown:?} calls a group as a subroutine, which is not supported")))
        }
        None => Ok(patterns.into_iter().map(compiled_pattern_bytes).sum()),
    }
}

/// The least a compiled pattern is counted at, whatever it measures: a cache of parsed schemas
/// weighed by these holds at most its size over this many patterns, and so at most that many
/// matching caches, each of which grows (lazily, as inputs need) up to
/// [`limits::JSON_PATTERN_CACHE_BYTES_MAX`] per thread matching it.
pub const PATTERN_BYTES_MIN: usize = 16 * 1024;

/// Memory `pattern` takes once compiled: built here as the `regex` crate builds it (within the
/// same size limit) and measured with a first matching cache, at least [`PATTERN_BYTES_MIN`].
/// The validator compiles the pattern again, its ECMA syntax translated; one that `regex` does
/// not take as written (look-around, for the backtracking engine) is counted at the size limit.
fn compiled_pattern_bytes(pattern: &str) -> usize {
    let config = regex_automata::meta::Config::new().nfa_size_limit(Some(limits::JSON_PATTERN_BYTES_MAX));
    let measured = regex_automata::meta::Regex::builder()
        .configure(config)
        .build(pattern)
        .map_or(limits::JSON_PATTERN_BYTES_MAX, |regex| regex.memory_usage() + regex.create_cache().memory_usage());
    measured.max(PATTERN_BYTES_MIN)
}

/// The draft a schema is written in: its `$schema`, else draft 7.
fn draft_of(schema: &Value) -> Result<Draft, SchemaError> {
    match Draft::Draft7.detect(schema) {
        Draft::Unknown => Err(invalid("unknown $schema (drafts 4, 6, 7, 2019-09 and 2020-12 are known)")),
        draft => Ok(draft),
    }
}

/// Writes `value` as compact JSON with object keys in sorted order, whatever order the map
/// keeps them in.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A schema node and the document its local `$ref`s resolve in.
#[derive(Clone, Copy)]
struct Node<'a> {
    value: &'a Value,
    doc: &'a Value,
}

impl<'a> Node<'a> {
    fn root(doc: &'a Value) -> Self {
        Self { value: doc, doc }
    }

    fn at(self, value: &'a Value) -> Self {
        Self { value, doc: self.doc }
    }

    fn get(self, keyword: &str) -> Option<&'a Value> {
        self.value.as_object().and_then(|o| o.get(keyword))
    }

    fn child(self, keyword: &str) -> Option<Self> {
        self.get(keyword).map(|v| self.at(v))
    }

    fn object(self) -> Option<&'a Map<String, Value>> {
        self.value.as_object()
    }

    /// `true`, `{}`, or only annotations: accepts every instance.
    fn accepts_anything(self) -> bool {
        match self.value {
            Value::Bool(b) => *b,
            Value::Object(o) => o.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
            _ => false,
        }
    }
}

/// Keywords that never change what validates.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "definitions",
    "$defs",
    "$anchor",
    "connect.index",
    "connect.type",
    "connect.parameters",
];

/// Keywords the check compares by their meaning; any other keyword must be equal in both.
const MODELED: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "properties",
    "additionalProperties",
    "required",
    "maxProperties",
    "minProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxLength",
    "minLength",
    "pattern",
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
];

const ALL_TYPES: &[&str] = &["array", "boolean", "integer", "null", "number", "object", "string"];

/// Reading schemas nested deeper than this is refused as a difference.
const DEPTH_MAX: usize = 64;
/// Steps one check may take: a node comparison, a value of an enum or a node of a keyword's
/// value compared for equality is one each. Unions compare branch against branch, so nested
/// unions multiply; past it the schemas are reported as too complex to compare.
const WORK_MAX: usize = 300_000;
/// Differences one check reports; the first ones say enough.
const DIFFERENCES_MAX: usize = 100;
/// Longest property name written into a difference's path.
const PATH_NAME_CHARS_MAX: usize = 64;

/// The schema that accepts anything, for a writer keyword left out.
static ANY: Value = Value::Bool(true);
static NO_PROPERTIES: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

struct Check<'a> {
    reader: &'a JsonSchema,
    writer: &'a JsonSchema,
    /// (reader, writer) node pairs being compared: recursive schemas end there.
    seen: HashSet<(usize, usize)>,
    /// Pairs compared to the end, with what was found. Definitions shared through `$ref` (each
    /// applying the next twice, say) reach the same pair by exponentially many paths: each is
    /// compared once, and its differences reported where it was first met.
    compared: HashMap<(usize, usize), Compared>,
    /// Times a comparison met a pair already in progress: a result that rests on one is not
    /// remembered, since it assumed that pair reads.
    cycles_met: usize,
    /// Union trials (`quietly`) in progress: what they find is not reported.
    quiet: usize,
    /// Differences met, reported or not.
    differences_met: usize,
    found: Vec<Difference>,
    work_left: usize,
    depth: usize,
}

/// A property name as a path segment, cut short.
fn segment(name: &str) -> String {
    match name.char_indices().nth(PATH_NAME_CHARS_MAX) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_owned(),
    }
}

/// What comparing a pair to the end found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compared {
    Reads,
    /// Differences, reported where the pair was first met.
    Reported,
    /// Differences, found only inside a union trial: reported when met outside one.
    Unreported,
}

impl<'a> Check<'a> {
    fn report(&mut self, kind: &'static str, path: &str, description: String) {
        self.differences_met += 1;
        if self.found.len() < DIFFERENCES_MAX {
            self.found.push(Difference { kind, path: path.to_owned(), description });
        }
    }

    /// Takes `steps` from the budget; false once it is spent.
    fn spend(&mut self, steps: usize) -> bool {
        self.work_left = self.work_left.saturating_sub(steps);
        self.work_left > 0
    }

    /// Whether two values are equal, paying a step per node looked at.
    fn equal(&mut self, a: &Value, b: &Value) -> bool {
        if !self.spend(1) {
            return false;
        }
        match (a, b) {
            (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| self.equal(x, y)),
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| self.equal(v, w)))
            }
            _ => a == b,
        }
    }

    /// Follows `$ref`s (a node with only a `$ref` and annotations), at most 32 in a row.
    fn deref(schema: &'a JsonSchema, mut node: Node<'a>) -> Node<'a> {
        for _ in 0..32 {
            let Some(reference) = node.get("$ref").and_then(Value::as_str) else { return node };
            let only_ref =
                node.object().is_some_and(|o| o.keys().all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str())));
            match schema.resolve(node, reference) {
                Some(target) if only_ref => node = target,
                _ => return node,
            }
        }
        node
    }

    /// Whether `reader` reads `writer` without differences (nothing recorded).
    fn quietly(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) -> bool {
        let (before, met) = (self.found.len(), self.differences_met);
        self.quiet += 1;
        self.compare(reader, writer, path);
        self.quiet -= 1;
        let ok = self.differences_met == met && self.work_left > 0;
        // A failed trial is no difference of the comparison around it.
        self.found.truncate(before);
        self.differences_met = met;
        ok
    }

    fn compare(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        if !self.spend(1) {
            return;
        }
        if self.depth >= DEPTH_MAX {
            self.report("SCHEMA_TOO_DEEP", path, format!("schemas nest deeper than {DEPTH_MAX} levels"));
            return;
        }
        let reader = Self::deref(self.reader, reader);
        let writer = Self::deref(self.writer, writer);
        let pair = (std::ptr::from_ref(reader.value) as usize, std::ptr::from_ref(writer.value) as usize);
        match self.compared.get(&pair) {
            Some(Compared::Reads) => return,
            Some(Compared::Reported) if self.quiet == 0 => return,
            // A trial fails on a pair known not to read; its differences were (or will be)
            // reported outside trials.
            Some(Compared::Reported | Compared::Unreported) if self.quiet > 0 => {
                self.differences_met += 1;
                return;
            }
            _ => {}
        }
        if !self.seen.insert(pair) {
            self.cycles_met += 1;
            return;
        }
        let (met, cycles) = (self.differences_met, self.cycles_met);
        self.depth += 1;
        self.compare_resolved(reader, writer, path);
        self.depth -= 1;
        self.seen.remove(&pair);
        if self.work_left > 0 && self.cycles_met == cycles {
            let found = match (self.differences_met == met, self.quiet) {
                (true, _) => Compared::Reads,
                (false, 0) => Compared::Reported,
                (false, _) => Compared::Unreported,
            };
            self.compared.insert(pair, found);
        }
    }

    fn compare_resolved(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        if writer.value == &Value::Bool(false) || reader.accepts_anything() {
            return;
        }
        if reader.value == &Value::Bool(false) {
            self.report("TYPE_NARROWED", path, format!("the reader accepts nothing at '{path}'"));
            return;
        }
        // Unions: every writer branch must be read by the reader; a reader union reads a
        // writer when one of its branches does.
        if let Some(branches) = sole_combinator(writer, &["anyOf", "oneOf"]) {
            for (i, branch) in branches.iter().enumerate() {
                self.compare(reader, writer.at(branch), &format!("{path}/{}/{i}", combinator_name(writer)));
            }
            return;
        }
        for keyword in ["anyOf", "oneOf"] {
            let Some(branches) = reader.get(keyword).and_then(Value::as_array) else { continue };
            if !branches.iter().any(|b| self.quietly(reader.at(b), writer, path)) {
                self.report(
                    "SUM_TYPE_NARROWED",
                    &format!("{path}/{keyword}"),
                    format!("no branch of the reader's {keyword} at '{path}' reads the writer's schema"),
                );
            }
        }
        if sole_combinator(reader, &["anyOf", "oneOf"]).is_some() {
            return;
        }
        self.compare_types(reader, writer, path);
        self.compare_enums(reader, writer, path);
        self.compare_bounds(reader, writer, path);
        self.compare_objects(reader, writer, path);
        self.compare_arrays(reader, writer, path);
        self.compare_products(reader, writer, path);
        self.compare_others(reader, writer, path);
    }

    fn compare_types(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let (r, w) = (types(reader), types(writer));
        let read = |t: &str| r.contains(t) || (t == "integer" && r.contains("number"));
        let missing: Vec<&str> = w.iter().copied().filter(|t| !read(t)).collect();
        if !missing.is_empty() {
            let kind = if r.iter().all(|t| w.contains(t)) { "TYPE_NARROWED" } else { "TYPE_CHANGED" };
            self.report(kind, path, format!("the reader at '{path}' does not accept type(s) {}", missing.join(", ")));
        }
    }

    fn compare_enums(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let Some(allowed) = values_of(reader) else { return };
        let at = format!("{path}/enum");
        let Some(written) = values_of(writer) else {
            self.report(
                "ENUM_ARRAY_NARROWED",
                &at,
                format!("the reader restricts '{path}' to an enum the writer does not have"),
            );
            return;
        };
        if !self.spend(allowed.len() + written.len()) {
            return;
        }
        // Values compared by their JSON text (object keys are sorted): linear, not N by M.
        let text = |v: &Value| {
            let mut out = String::new();
            write_canonical(v, &mut out);
            out
        };
        let allowed: HashSet<String> = allowed.into_iter().map(text).collect();
        if written.into_iter().any(|v| !allowed.contains(&text(v))) {
            self.report(
                "ENUM_ARRAY_NARROWED",
                &at,
                format!("the reader's enum at '{path}' lacks values the writer's allows"),
            );
        }
    }

    /// Numeric limits on numbers, strings, arrays and objects: the reader's must be no tighter.
    fn compare_bounds(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        // (keyword, the reader's value must be at least the writer's, kind when added, when tightened)
        const BOUNDS: &[(&str, bool, &str, &str)] = &[
            ("maximum", true, "MAXIMUM_ADDED", "MAXIMUM_DECREASED"),
            ("minimum", false, "MINIMUM_ADDED", "MINIMUM_INCREASED"),
            ("exclusiveMaximum", true, "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MAXIMUM_DECREASED"),
            ("exclusiveMinimum", false, "EXCLUSIVE_MINIMUM_ADDED", "EXCLUSIVE_MINIMUM_INCREASED"),
            ("maxLength", true, "MAX_LENGTH_ADDED", "MAX_LENGTH_DECREASED"),
            ("minLength", false, "MIN_LENGTH_ADDED", "MIN_LENGTH_INCREASED"),
            ("maxItems", true, "MAX_ITEMS_ADDED", "MAX_ITEMS_DECREASED"),
            ("minItems", false, "MIN_ITEMS_ADDED", "MIN_ITEMS_INCREASED"),
            ("maxProperties", true, "MAX_PROPERTIES_ADDED", "MAX_PROPERTIES_DECREASED"),
            ("minProperties", false, "MIN_PROPERTIES_ADDED", "MIN_PROPERTIES_INCREASED"),
        ];
        for &(keyword, upper, added, tightened) in BOUNDS {
            let Some(r) = reader.get(keyword) else { continue };
            let at = format!("{path}/{keyword}");
            // Draft 4's boolean exclusive limits: compared for equality.
            if r.is_boolean() || writer.get(keyword).is_some_and(Value::is_boolean) {
                if writer.get(keyword) != Some(r) && r != &Value::Bool(false) {
                    self.report(tightened, &at, format!("'{keyword}' at '{path}' changed"));
                }
                continue;
            }
            let Some(r) = r.as_f64() else { continue };
            match writer.get(keyword).and_then(Value::as_f64) {
                None => self.report(added, &at, format!("the reader adds '{keyword}' {r} at '{path}'")),
                Some(w) if (upper && r < w) || (!upper && r > w) => {
                    self.report(tightened, &at, format!("'{keyword}' at '{path}' goes from {w} to {r}"))
                }
                Some(_) => {}
            }
        }
        if let Some(r) = reader.get("multipleOf").and_then(Value::as_f64) {
            let at = format!("{path}/multipleOf");
            match writer.get("multipleOf").and_then(Value::as_f64) {
                None => self.report("MULTIPLE_OF_ADDED", &at, format!("the reader adds 'multipleOf' {r} at '{path}'")),
                Some(w) if (w / r).fract() != 0.0 => {
                    self.report("MULTIPLE_OF_CHANGED", &at, format!("'multipleOf' at '{path}' goes from {w} to {r}"))
                }
                Some(_) => {}
            }
        }
        if let Some(r) = reader.get("pattern") {
            let at = format!("{path}/pattern");
            match writer.get("pattern") {
                None => self.report("PATTERN_ADDED", &at, format!("the reader adds a pattern at '{path}'")),
                Some(w) if w != r => self.report("PATTERN_CHANGED", &at, format!("the pattern at '{path}' changed")),
                Some(_) => {}
            }
        }
        if reader.get("uniqueItems") == Some(&Value::Bool(true))
            && writer.get("uniqueItems") != Some(&Value::Bool(true))
        {
            let at = format!("{path}/uniqueItems");
            self.report("UNIQUE_ITEMS_ADDED", &at, format!("the reader requires unique items at '{path}'"));
        }
    }

    fn compare_objects(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let empty: &'a Map<String, Value> = &NO_PROPERTIES;
        let r_props = reader.get("properties").and_then(Value::as_object).unwrap_or(empty);
        let w_props = writer.get("properties").and_then(Value::as_object).unwrap_or(empty);
        let r_additional = reader.child("additionalProperties");
        let w_additional = writer.child("additionalProperties");
        let closed = |n: Option<Node<'a>>| n.is_some_and(|n| n.value == &Value::Bool(false));
        let open = |n: Option<Node<'a>>| n.is_none_or(Node::accepts_anything);
        // A writer closed but for its patternProperties may have written any matching name.
        let w_closed = closed(w_additional) && writer.get("patternProperties").is_none();
        let r_required = strings(reader.get("required"));
        let w_required = strings(writer.get("required"));
        for (name, r_schema) in r_props {
            let at = format!("{path}/properties/{}", segment(name));
            if let Some(w_schema) = w_props.get(name) {
                self.compare(reader.at(r_schema), writer.at(w_schema), &at);
                continue;
            }
            let r_node = reader.at(r_schema);
            if w_closed {
                // The writer never wrote it: only a required one without a default fails.
                if r_required.contains(name.as_str()) && r_node.get("default").is_none() {
                    self.report(
                        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                        &at,
                        format!("the reader requires a property '{}' the writer never writes", segment(name)),
                    );
                }
            } else if let Some(w_extra) = w_additional.filter(|n| !n.accepts_anything() && !closed(Some(*n))) {
                // The writer may have written it under its additionalProperties schema.
                self.compare(r_node, w_extra, &at);
            } else if !r_node.accepts_anything() {
                self.report(
                    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                    &at,
                    format!(
                        "the reader adds a property '{}' with a schema while the writer's content model is open (any value may have been written under that name)",
                        segment(name)
                    ),
                );
            }
        }
        for (name, w_schema) in w_props {
            if r_props.contains_key(name) || w_schema == &Value::Bool(false) {
                continue;
            }
            let at = format!("{path}/properties/{}", segment(name));
            if closed(r_additional) {
                self.report(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    &at,
                    format!(
                        "the reader's closed content model no longer has the property '{}' the writer writes",
                        segment(name)
                    ),
                );
            } else if let Some(r_extra) = r_additional.filter(|n| !n.accepts_anything()) {
                self.compare(r_extra, writer.at(w_schema), &at);
            }
        }
        match (r_additional, w_additional) {
            (Some(r), w) if !r.accepts_anything() && !closed(w) => {
                let at = format!("{path}/additionalProperties");
                if open(w) {
                    let kind = if closed(Some(r)) {
                        "ADDITIONAL_PROPERTIES_REMOVED"
                    } else {
                        "ADDITIONAL_PROPERTIES_NARROWED"
                    };
                    self.report(kind, &at, format!("the reader restricts additional properties at '{path}'"));
                } else if let Some(w) = w {
                    self.compare(r, w, &at);
                }
            }
            _ => {}
        }
        for name in r_required.difference(&w_required) {
            // As Confluent's registry: a new required property with a default is compatible.
            let has_default = r_props.get(*name).is_some_and(|p| p.get("default").is_some());
            // Reported above as added to the writer's closed content model.
            let added_to_closed = w_closed && !w_props.contains_key(*name) && r_props.contains_key(*name);
            if !has_default && !added_to_closed {
                self.report(
                    "REQUIRED_ATTRIBUTE_ADDED",
                    &format!("{path}/required"),
                    format!("the reader requires '{}', which the writer does not", segment(name)),
                );
            }
        }
    }

    /// Arrays position by position: a tuple's positions (`prefixItems`, or `items` as a list
    /// before 2020-12), then the schema of the positions after them (`items` after
    /// `prefixItems`, `additionalItems` after a list, else `items`).
    fn compare_arrays(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let prefix = |n: Node<'a>| -> &'a [Value] {
            n.get("prefixItems")
                .or_else(|| n.get("items").filter(|i| i.is_array()))
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice)
        };
        let tail = |n: Node<'a>| -> Option<Node<'a>> {
            if n.get("prefixItems").is_some() {
                n.child("items")
            } else if n.get("items").is_some_and(Value::is_array) {
                n.child("additionalItems")
            } else {
                n.child("items")
            }
        };
        let (r_prefix, w_prefix) = (prefix(reader), prefix(writer));
        let (r_tail, w_tail) = (tail(reader), tail(writer));
        let any = writer.at(&ANY);
        for i in 0..r_prefix.len().max(w_prefix.len()) {
            let r = r_prefix.get(i).map(|v| reader.at(v)).or(r_tail).unwrap_or(any);
            let w = w_prefix.get(i).map(|v| writer.at(v)).or(w_tail).unwrap_or(any);
            self.compare(r, w, &format!("{path}/items/{i}"));
        }
        if let Some(r) = r_tail.filter(|n| !n.accepts_anything()) {
            self.compare(r, w_tail.unwrap_or(any), &format!("{path}/items"));
        }
    }

    /// `allOf`: each of the reader's subschemas must read the writer, through one of the
    /// writer's own subschemas or the writer as a whole.
    fn compare_products(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let Some(r) = reader.get("allOf").and_then(Value::as_array) else { return };
        let w = writer.get("allOf").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for (i, r_item) in r.iter().enumerate() {
            let at = format!("{path}/allOf/{i}");
            let r_node = reader.at(r_item);
            if w.iter().any(|w_item| self.quietly(r_node, writer.at(w_item), &at)) {
                continue;
            }
            if w.is_empty() {
                self.compare(r_node, writer, &at);
            } else {
                self.report(
                    "PRODUCT_TYPE_EXTENDED",
                    &at,
                    format!("subschema {i} of the reader's allOf at '{path}' is read by none of the writer's"),
                );
            }
        }
    }

    /// Every keyword the check does not model must be unchanged where the reader has it, and
    /// so must whatever its `$ref`s point at.
    fn compare_others(&mut self, reader: Node<'a>, writer: Node<'a>, path: &str) {
        let Some(r) = reader.object() else { return };
        for (keyword, value) in r {
            if ANNOTATIONS.contains(&keyword.as_str()) || MODELED.contains(&keyword.as_str()) {
                continue;
            }
            let at = format!("{path}/{}", segment(keyword));
            let same = match writer.get(keyword) {
                Some(w) => self.equal(value, w) && self.same_targets(reader, writer, value),
                None => false,
            };
            if !same {
                self.report(
                    "KEYWORD_CHANGED",
                    &at,
                    format!(
                        "'{}' at '{path}' differs and is not compared by meaning, so it is taken as incompatible",
                        segment(keyword)
                    ),
                );
            }
        }
        // `unevaluated*` depend on what the other keywords evaluate: any change there counts.
        for (keyword, evaluated) in [
            ("unevaluatedProperties", &["properties", "patternProperties", "additionalProperties"][..]),
            ("unevaluatedItems", &["items", "prefixItems", "additionalItems", "contains"][..]),
        ] {
            if reader.get(keyword).is_none() {
                continue;
            }
            let changed = evaluated
                .iter()
                .chain(&["allOf", "anyOf", "oneOf", "$ref", "if", "then", "else", "dependentSchemas"])
                .any(|k| match (reader.get(k), writer.get(k)) {
                    (None, None) => false,
                    (Some(a), Some(b)) => !self.equal(a, b),
                    _ => true,
                });
            if changed {
                self.report(
                    "KEYWORD_CHANGED",
                    &format!("{path}/{keyword}"),
                    format!("'{keyword}' at '{path}' applies to keywords that changed"),
                );
            }
        }
        // A `$ref` next to other keywords: its target must read the writer too.
        if let Some(reference) = reader.get("$ref").and_then(Value::as_str) {
            let at = format!("{path}/$ref");
            // Against the writer's own `$ref` target when it has one (the writer's instances
            // match it), else against the writer as a whole.
            let written = match writer.get("$ref").and_then(Value::as_str) {
                Some(w) => self.writer.resolve(writer, w),
                None => Some(writer),
            };
            match (self.reader.resolve(reader, reference), written) {
                (Some(target), Some(written)) => self.compare(target, written, &at),
                _ => self.report("KEYWORD_CHANGED", &at, format!("'$ref' at '{path}' does not resolve")),
            }
        }
    }

    /// Whether every `$ref` inside `value` (equal in both schemas) points at equal schemas.
    fn same_targets(&mut self, reader: Node<'a>, writer: Node<'a>, value: &'a Value) -> bool {
        let mut refs = Vec::new();
        collect_refs(value, &mut refs);
        refs.into_iter().all(|reference| {
            match (self.reader.resolve(reader, reference), self.writer.resolve(writer, reference)) {
                (Some(r), Some(w)) => self.equal(r.value, w.value),
                _ => false,
            }
        })
    }
}

/// The `$ref` strings anywhere inside `value`.
fn collect_refs<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// The `anyOf`/`oneOf` branches of a node that has nothing else but annotations.
fn sole_combinator<'a>(node: Node<'a>, keywords: &[&str]) -> Option<&'a Vec<Value>> {
    let object = node.object()?;
    let (keyword, branches) = object.iter().find(|(k, _)| keywords.contains(&k.as_str()))?;
    let alone = object.keys().all(|k| k == keyword || ANNOTATIONS.contains(&k.as_str()));
    alone.then(|| branches.as_array()).flatten()
}

fn combinator_name(node: Node<'_>) -> &'static str {
    if node.get("oneOf").is_some() { "oneOf" } else { "anyOf" }
}

/// The JSON types a node accepts by its `type` keyword (all when absent).
fn types(node: Node<'_>) -> BTreeSet<&'static str> {
    let named = |v: &Value| ALL_TYPES.iter().copied().find(|t| v.as_str() == Some(t));
    match node.get("type") {
        Some(Value::String(_)) => node.get("type").and_then(named).into_iter().collect(),
        Some(Value::Array(list)) => list.iter().filter_map(named).collect(),
        _ => ALL_TYPES.iter().copied().collect(),
    }
}

/// The values a node allows by `enum` or `const`, if it limits them.
fn values_of(node: Node<'_>) -> Option<Vec<&Value>> {
    if let Some(c) = node.get("const") {
        return Some(vec![c]);
    }
    node.get("enum").and_then(Value::as_array).map(|v| v.iter().collect())
}

fn strings(value: Option<&Value>) -> BTreeSet<&str> {
    value.and_then(Value::as_array).map(|v| v.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
