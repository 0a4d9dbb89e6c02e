//! What validating an instance against a JSON Schema costs, counted before the validator runs.
//!
//! The validator (`jsonschema`) has no budget of its own, and its work is not bounded by the
//! sizes of schema and instance together: it follows a `$ref` each time it meets one, so
//! definitions that each refer twice to the next (`a0: {allOf: [{$ref: a1}, {$ref: a1}]}`, 24
//! deep) apply 2^24 subschemas to the single value `1`, and an `allOf` of a thousand subschemas
//! under `items` applies each to every item. So a parsed schema keeps its subschemas as a graph
//! ([`CostGraph`]: each subschema once, a `$ref` an edge to what it names), and an instance's cost
//! is counted on that graph before it is validated. A subschema reached by more than one edge
//! counts each value it is applied to once and is remembered, so counting takes at most the
//! steps it allows ([`crate::limits::JSON_VALIDATION_STEPS_BASE`]) even where the validator would
//! take exponentially many.
//!
//! The count errs high where the validator's path depends on the instance: every
//! `patternProperties` and `additionalProperties` subschema counts as applying to every member,
//! `if`, `then` and `else` all count, and a reference that may name several subschemas (a
//! `$dynamicRef`, a `$ref` beside an `$id` that drafts read differently) reaches all of them. A
//! `$ref` the graph cannot follow where the validator would go refuses the schema when it is
//! parsed, since what lies behind it could not be counted.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::SchemaError;
use crate::limits;

/// Keywords whose values are instances, not schemas: never walked as subschemas.
pub(super) const INSTANCE_KEYWORDS: &[&str] = &["enum", "const", "default", "examples"];
/// Keywords holding subschemas applied only where a `$ref` reaches them.
const DEFINITIONS: &[&str] = &["$defs", "definitions"];
/// Keywords whose values a validation does not read: left out of an application's own steps.
const UNREAD: &[&str] = &["$defs", "definitions", "default", "examples"];

/// How a pattern is matched, and so what one match costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Engine {
    /// Translated to the `regex` crate's syntax and run in linear time.
    Linear,
    /// Handed as written to fancy-regex's backtracking engine, as `jsonschema` does with a
    /// pattern the `regex` crate's parser stops at for its look-around or backreferences.
    Backtracking,
    /// Refused by the `regex` crate's parser for another reason: `jsonschema` refuses it too,
    /// unless a rewrite (`\cX` escapes) makes it parse; counted as backtracking to be safe.
    Other,
}

impl Engine {
    pub(super) fn of(pattern: &str) -> Self {
        use regex_syntax::ast::ErrorKind;
        match regex_syntax::ast::parse::Parser::new().parse(pattern) {
            Ok(_) => Self::Linear,
            Err(e) if matches!(e.kind(), ErrorKind::UnsupportedLookAround | ErrorKind::UnsupportedBackreference) => {
                Self::Backtracking
            }
            Err(_) => Self::Other,
        }
    }

    /// Steps one match against `bytes` of text takes.
    fn match_steps(self, bytes: usize) -> u64 {
        match self {
            Self::Linear => text_steps(bytes),
            Self::Backtracking | Self::Other => text_steps(bytes).saturating_add(limits::BACKTRACKING_MATCH_STEPS),
        }
    }
}

/// Steps a scan of `bytes` of text takes: one, and one more per
/// [`limits::TEXT_BYTES_PER_STEP`].
fn text_steps(bytes: usize) -> u64 {
    1 + (bytes / limits::TEXT_BYTES_PER_STEP) as u64
}

/// One subschema: what applying it to a value costs by itself, and the subschemas it applies
/// in turn, to the same value or to the value's members and items.
#[derive(Debug, Default)]
struct CostNode {
    /// Steps one application takes by itself: one, plus the entries of the keyword values it
    /// reads (`enum`, `required`, `properties`, a `type` list, `allOf`'s list).
    own: u64,
    /// Reached by more than one edge (or the root): its counts are remembered per value.
    shared: bool,
    /// Applied to the same value: `allOf`, `anyOf`, `oneOf`, `not`, `if`, `then`, `else`, and
    /// what a `$ref`, `$dynamicRef` or `$recursiveRef` names.
    same: Vec<usize>,
    /// Applied to the same value when it is an object with that member (`dependentSchemas`,
    /// draft 7's `dependencies`).
    when_present: Vec<(String, usize)>,
    /// Applied to that member's value (`properties`).
    properties: Vec<(String, usize)>,
    /// Applied to every member's value (`patternProperties`, `additionalProperties`,
    /// `unevaluatedProperties`).
    every_member: Vec<usize>,
    /// Matched against every member's name (`patternProperties`).
    name_patterns: Vec<Engine>,
    /// Applied to every member's name (`propertyNames`).
    property_names: Option<usize>,
    /// Applied to the item at each position (`prefixItems`, `items` as a list).
    items: Vec<usize>,
    /// Applied to every item (`items`, `additionalItems`, `contains`, `unevaluatedItems`).
    every_item: Vec<usize>,
    /// Matched against a string value (`pattern`).
    pattern: Option<Engine>,
    /// Reads a string value's text (`format`).
    reads_text: bool,
    /// Compares every item (`uniqueItems`, hashed: about once each).
    reads_items: bool,
}

/// A JSON Schema's subschemas as the validator applies them; node 0 is the schema itself.
#[derive(Debug)]
pub(super) struct CostGraph {
    nodes: Vec<CostNode>,
}

/// Counting stopped past the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OverBudget;

impl CostGraph {
    /// The graph of `root` (read against `base`, the URI it is known by) and of `references`
    /// (each with the URI a `$ref` reaches it at). `draft4` says which documents are in draft 4,
    /// where `id` rather than `$id` sets a base: `[root, references...]`.
    pub(super) fn build(
        root: &Value,
        base: &str,
        references: &[(String, Value)],
        draft4: &[bool],
    ) -> Result<Self, SchemaError> {
        let mut builder = Builder::default();
        let documents =
            std::iter::once((base, root)).chain(references.iter().map(|(uri, value)| (uri.as_str(), value)));
        // Every document is registered before any is walked, so a `$ref` may name a later one.
        let documents: Vec<(String, &Value, bool)> = documents
            .zip(draft4.iter().copied().chain(std::iter::repeat(false)))
            .map(|((uri, value), draft4)| (split_fragment(uri).0.to_owned(), value, draft4))
            .collect();
        for (uri, value, _) in &documents {
            builder.resources.entry(uri.clone()).or_default().push(*value);
        }
        for (uri, value, draft4) in &documents {
            builder.walk(value, uri, *draft4);
        }
        builder.resolve();
        builder.finish()
    }

    /// Whether validating `instance` fits its budget; the error says it does not.
    pub(super) fn check(&self, instance: &Value) -> Result<(), String> {
        let budget = budget_of(instance);
        self.steps(instance, budget).map(drop).map_err(|OverBudget| {
            format!(
                "validating it would take more than its budget of {budget} steps (subschemas applied to its values)"
            )
        })
    }

    /// The steps validating `instance` takes, counted in at most `budget` steps, if at most
    /// `budget`.
    pub(super) fn steps(&self, instance: &Value, budget: u64) -> Result<u64, OverBudget> {
        let mut count = Count { graph: self, known: HashMap::new(), calls_left: budget, budget, depth: 0 };
        count.of(0, instance)
    }
}

/// The steps validating `instance` may take ([`limits::JSON_VALIDATION_STEPS_BASE`] and
/// [`limits::JSON_VALIDATION_STEPS_PER_VALUE`]).
pub(super) fn budget_of(instance: &Value) -> u64 {
    let mut values: u64 = 0;
    let mut stack = vec![instance];
    while let Some(value) = stack.pop() {
        values += 1;
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => {
                // A member's name counts as a value too.
                values += members.len() as u64;
                stack.extend(members.values());
            }
            _ => {}
        }
    }
    limits::JSON_VALIDATION_STEPS_BASE.saturating_add(values.saturating_mul(limits::JSON_VALIDATION_STEPS_PER_VALUE))
}

fn address(value: &Value) -> usize {
    std::ptr::from_ref(value) as usize
}

fn split_fragment(uri: &str) -> (&str, &str) {
    uri.split_once('#').unwrap_or((uri, ""))
}

/// `reference` resolved against `base`, as the validator's URIs are.
fn resolve_uri(base: &str, reference: &str) -> Option<String> {
    let base = jsonschema::uri::from_str(base).ok()?;
    let resolved = jsonschema::uri::resolve_against(&base.borrow(), reference).ok()?;
    Some(resolved.as_str().to_owned())
}

/// A URI fragment with its `%XX` escapes decoded (a JSON pointer in a `$ref` is written so).
fn percent_decoded(fragment: &str) -> Cow<'_, str> {
    if !fragment.contains('%') {
        return Cow::Borrowed(fragment);
    }
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && let Some(byte) = fragment.get(at + 1..at + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(fragment), Cow::Owned)
}

/// Subschemas a reference may name, each with the base it is read against.
type Targets<'v> = Vec<(&'v Value, String)>;

/// A reference met while walking, resolved once every resource and anchor is known.
struct Pending<'v> {
    node: usize,
    keyword: &'v str,
    reference: &'v str,
    /// The bases it may be read against: the subschema's own, and the enclosing one (before
    /// draft 2019-09 a `$ref` ignores an `$id` beside it).
    bases: Vec<String>,
}

#[derive(Default)]
struct Builder<'v> {
    nodes: Vec<CostNode>,
    /// Nodes by the address of their subschema.
    index: HashMap<usize, usize>,
    /// Resources by URI (without a fragment): each document, each subschema with an `$id`.
    resources: HashMap<String, Vec<&'v Value>>,
    /// Plain-name anchors by (resource URI, name): `$anchor`, `$dynamicAnchor`, and an `$id`
    /// (`id` in draft 4) holding only a fragment, as drafts 6 and 7 name anchors.
    anchors: HashMap<(String, String), Targets<'v>>,
    /// Where a `$dynamicRef` to a name may land, and a `$recursiveRef`: every subschema with that
    /// `$dynamicAnchor`, every one with `$recursiveAnchor: true`, with their bases.
    dynamic: HashMap<String, Targets<'v>>,
    recursive: Targets<'v>,
    pending: Vec<Pending<'v>>,
    /// Nodes with a reference that reached nothing, and the reference.
    unresolved: Vec<(usize, String)>,
}

impl<'v> Builder<'v> {
    /// The node of `value`, a subschema read against `base`, walking it and what it holds on
    /// first sight.
    fn walk(&mut self, value: &'v Value, base: &str, draft4: bool) -> usize {
        if let Some(&node) = self.index.get(&address(value)) {
            return node;
        }
        let node = self.nodes.len();
        self.nodes.push(CostNode { own: 1, ..CostNode::default() });
        self.index.insert(address(value), node);
        let Value::Object(keywords) = value else { return node };
        let own_base = self.identify(value, keywords, base, draft4);
        let mut bases = vec![own_base.clone()];
        if own_base != base {
            bases.push(base.to_owned());
        }
        let mut entry = CostNode { own: 1, ..CostNode::default() };
        for (keyword, child) in keywords {
            let keyword = keyword.as_str();
            if !UNREAD.contains(&keyword) {
                let entries = match child {
                    Value::Array(items) => items.len(),
                    Value::Object(members) => members.len(),
                    _ => 0,
                };
                entry.own = entry.own.saturating_add(entries as u64);
            }
            match keyword {
                "allOf" | "anyOf" | "oneOf" => {
                    for item in child.as_array().into_iter().flatten() {
                        entry.same.push(self.walk(item, &own_base, draft4));
                    }
                }
                "not" | "if" | "then" | "else" => entry.same.push(self.walk(child, &own_base, draft4)),
                "dependentSchemas" | "dependencies" => {
                    // `dependencies` also holds lists of names (`dependentRequired`'s older form).
                    for (name, schema) in members(child).filter(|(_, s)| s.is_object() || s.is_boolean()) {
                        entry.when_present.push((name.clone(), self.walk(schema, &own_base, draft4)));
                    }
                }
                "properties" => {
                    for (name, schema) in members(child) {
                        entry.properties.push((name.clone(), self.walk(schema, &own_base, draft4)));
                    }
                }
                "patternProperties" => {
                    for (pattern, schema) in members(child) {
                        entry.name_patterns.push(Engine::of(pattern));
                        entry.every_member.push(self.walk(schema, &own_base, draft4));
                    }
                }
                "additionalProperties" | "unevaluatedProperties" => {
                    entry.every_member.push(self.walk(child, &own_base, draft4))
                }
                "propertyNames" => entry.property_names = Some(self.walk(child, &own_base, draft4)),
                "prefixItems" => {
                    for item in child.as_array().into_iter().flatten() {
                        entry.items.push(self.walk(item, &own_base, draft4));
                    }
                }
                "items" => match child {
                    // A list of items before 2020-12; beside `prefixItems` it is malformed, and
                    // counted against every item.
                    Value::Array(list) if !keywords.contains_key("prefixItems") => {
                        for item in list {
                            entry.items.push(self.walk(item, &own_base, draft4));
                        }
                    }
                    Value::Array(list) => {
                        for item in list {
                            entry.every_item.push(self.walk(item, &own_base, draft4));
                        }
                    }
                    _ => entry.every_item.push(self.walk(child, &own_base, draft4)),
                },
                "additionalItems" | "contains" | "unevaluatedItems" => {
                    entry.every_item.push(self.walk(child, &own_base, draft4))
                }
                "pattern" => entry.pattern = child.as_str().map(Engine::of),
                "format" => entry.reads_text = true,
                "uniqueItems" => entry.reads_items = child == &Value::Bool(true),
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    if let Some(reference) = child.as_str() {
                        self.pending.push(Pending { node, keyword, reference, bases: bases.clone() });
                    }
                }
                keyword if DEFINITIONS.contains(&keyword) => {
                    for (_, schema) in members(child) {
                        self.walk(schema, &own_base, draft4);
                    }
                }
                _ => {}
            }
        }
        if keywords.contains_key("unevaluatedProperties") || keywords.contains_key("unevaluatedItems") {
            // The validator applies the subschemas beside them again, to learn what they
            // evaluated.
            let again = entry.same.clone();
            entry.same.extend(again);
        }
        // What its references name is added once they are resolved.
        self.nodes[node] = entry;
        node
    }

    /// Registers `value` as a resource and an anchor where it says so, and gives the base its
    /// subschemas are read against.
    fn identify(&mut self, value: &'v Value, keywords: &'v Map<String, Value>, base: &str, draft4: bool) -> String {
        let id_keyword = if draft4 { "id" } else { "$id" };
        let mut own_base = split_fragment(base).0.to_owned();
        if let Some(id) = keywords.get(id_keyword).and_then(Value::as_str)
            && let Some(uri) = resolve_uri(base, id)
        {
            let (resource, fragment) = split_fragment(&uri);
            if !id.starts_with('#') {
                self.resources.entry(resource.to_owned()).or_default().push(value);
                own_base = resource.to_owned();
            }
            if !fragment.is_empty() && !fragment.starts_with('/') {
                self.anchors
                    .entry((resource.to_owned(), fragment.to_owned()))
                    .or_default()
                    .push((value, own_base.clone()));
            }
        }
        for keyword in ["$anchor", "$dynamicAnchor"] {
            if let Some(name) = keywords.get(keyword).and_then(Value::as_str) {
                self.anchors.entry((own_base.clone(), name.to_owned())).or_default().push((value, own_base.clone()));
                if keyword == "$dynamicAnchor" {
                    self.dynamic.entry(name.to_owned()).or_default().push((value, own_base.clone()));
                }
            }
        }
        if keywords.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
            self.recursive.push((value, own_base.clone()));
        }
        own_base
    }

    /// What `reference`, read against `base`, names: every subschema that may be it.
    fn targets(&self, base: &str, reference: &str) -> Targets<'v> {
        let Some(uri) = resolve_uri(base, reference) else { return Vec::new() };
        let (resource, fragment) = split_fragment(&uri);
        let fragment = percent_decoded(fragment);
        let roots = self.resources.get(resource).map_or(&[][..], Vec::as_slice);
        if fragment.is_empty() {
            roots.iter().map(|root| (*root, resource.to_owned())).collect()
        } else if fragment.starts_with('/') {
            roots
                .iter()
                .filter_map(|&root| root.pointer(&fragment))
                .map(|target| (target, resource.to_owned()))
                .collect()
        } else {
            self.anchors.get(&(resource.to_owned(), fragment.into_owned())).cloned().unwrap_or_default()
        }
    }

    /// Resolves the references met, walking what they name (which may meet more).
    fn resolve(&mut self) {
        while let Some(pending) = self.pending.pop() {
            let mut targets: Targets<'v> = Vec::new();
            for base in &pending.bases {
                targets.extend(self.targets(base, pending.reference));
            }
            match pending.keyword {
                "$dynamicRef" => {
                    let name = split_fragment(pending.reference).1;
                    targets.extend(self.dynamic.get(name).into_iter().flatten().cloned());
                }
                "$recursiveRef" => targets.extend(self.recursive.iter().cloned()),
                _ => {}
            }
            if targets.is_empty() || targets.len() > limits::JSON_REFERENCE_TARGETS_MAX {
                self.unresolved.push((pending.node, pending.reference.to_owned()));
                continue;
            }
            let mut reached = Vec::with_capacity(targets.len());
            for (target, base) in targets {
                // A target outside the subschemas walked so far (a pointer into an unknown
                // keyword) is read as draft 2019-09 and later read it.
                let next = self.walk(target, &base, false);
                if !reached.contains(&next) {
                    reached.push(next);
                }
            }
            self.nodes[pending.node].same.extend(reached);
        }
    }

    /// The graph, if every reference the validator may follow from the root reached something.
    fn finish(self) -> Result<CostGraph, SchemaError> {
        let mut nodes = self.nodes;
        let mut incoming = vec![0usize; nodes.len()];
        // The root is entered from outside.
        if let Some(root) = incoming.first_mut() {
            *root = 1;
        }
        for node in &nodes {
            for &next in node.edges() {
                incoming[next] += 1;
            }
        }
        // Only references the validator can reach from the root matter: one in an unused
        // definition never runs.
        let mut reachable = vec![false; nodes.len()];
        let mut stack = vec![0];
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut reachable[node], true) {
                continue;
            }
            stack.extend(nodes[node].edges().copied());
        }
        if let Some((_, reference)) = self.unresolved.iter().find(|(node, _)| reachable[*node]) {
            return Err(SchemaError::Invalid(format!(
                "Invalid schema: the $ref {reference:?} cannot be followed to count the work validating against it \
                 takes (it names no subschema Floe finds, or more than {})",
                limits::JSON_REFERENCE_TARGETS_MAX
            )));
        }
        for (node, count) in nodes.iter_mut().zip(incoming) {
            node.shared = count > 1;
        }
        Ok(CostGraph { nodes })
    }
}

fn members(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().into_iter().flatten()
}

impl CostNode {
    /// Every node this one applies, to the value or to its members and items.
    fn edges(&self) -> impl Iterator<Item = &usize> {
        self.same
            .iter()
            .chain(self.when_present.iter().map(|(_, next)| next))
            .chain(self.properties.iter().map(|(_, next)| next))
            .chain(&self.every_member)
            .chain(&self.property_names)
            .chain(&self.items)
            .chain(&self.every_item)
    }
}

/// The string a member's name is counted as when `propertyNames` applies to it: one value for
/// all names, whose text each name pays for apart.
static MEMBER_NAME: Value = Value::String(String::new());

/// One count of an instance's cost.
struct Count<'g> {
    graph: &'g CostGraph,
    /// Counts of shared nodes by (node, value address); `None` while being counted, which a
    /// node applied to the same value inside itself meets (the validator stops there too).
    known: HashMap<(usize, usize), Option<u64>>,
    /// Nodes the count may still visit: each visit is a step of the total too, so this ends a
    /// count that would pass the budget before the total says so.
    calls_left: u64,
    budget: u64,
    depth: usize,
}

impl Count<'_> {
    /// The steps applying node `node` to `value` takes.
    fn of(&mut self, node: usize, value: &Value) -> Result<u64, OverBudget> {
        self.calls_left = self.calls_left.checked_sub(1).ok_or(OverBudget)?;
        let graph = self.graph;
        let entry = &graph.nodes[node];
        let key = (node, address(value));
        if entry.shared {
            match self.known.get(&key) {
                Some(Some(steps)) => return Ok(*steps),
                Some(None) => return Ok(1),
                None => {
                    self.known.insert(key, None);
                }
            }
        }
        if self.depth >= limits::JSON_VALIDATION_DEPTH_MAX {
            return Err(OverBudget);
        }
        self.depth += 1;
        let mut steps = entry.own;
        for &next in &entry.same {
            let more = self.of(next, value)?;
            steps = self.add(steps, more)?;
        }
        match value {
            Value::Object(members) => {
                for (name, next) in &entry.when_present {
                    if members.contains_key(name) {
                        let more = self.of(*next, value)?;
                        steps = self.add(steps, more)?;
                    }
                }
                for (name, next) in &entry.properties {
                    if let Some(member) = members.get(name) {
                        let more = self.of(*next, member)?;
                        steps = self.add(steps, more)?;
                    }
                }
                // Members are walked only when something applies per member: otherwise the walk
                // would be work no step pays for.
                let per_member =
                    !entry.every_member.is_empty() || !entry.name_patterns.is_empty() || entry.property_names.is_some();
                if per_member {
                    for (name, member) in members {
                        for &next in &entry.every_member {
                            let more = self.of(next, member)?;
                            steps = self.add(steps, more)?;
                        }
                        for engine in &entry.name_patterns {
                            steps = self.add(steps, engine.match_steps(name.len()))?;
                        }
                        if let Some(next) = entry.property_names {
                            let more = self.of(next, &MEMBER_NAME)?;
                            steps = self.add(steps, more.saturating_add(text_steps(name.len())))?;
                        }
                    }
                }
            }
            Value::Array(items) => {
                for (&next, item) in entry.items.iter().zip(items) {
                    let more = self.of(next, item)?;
                    steps = self.add(steps, more)?;
                }
                if !entry.every_item.is_empty() {
                    for item in items {
                        for &next in &entry.every_item {
                            let more = self.of(next, item)?;
                            steps = self.add(steps, more)?;
                        }
                    }
                }
                if entry.reads_items {
                    steps = self.add(steps, items.len() as u64)?;
                }
            }
            Value::String(text) => {
                if let Some(engine) = entry.pattern {
                    steps = self.add(steps, engine.match_steps(text.len()))?;
                }
                if entry.reads_text {
                    steps = self.add(steps, text_steps(text.len()))?;
                }
            }
            _ => {}
        }
        self.depth -= 1;
        if entry.shared {
            self.known.insert(key, Some(steps));
        }
        Ok(steps)
    }

    fn add(&self, steps: u64, more: u64) -> Result<u64, OverBudget> {
        let total = steps.saturating_add(more);
        if total > self.budget { Err(OverBudget) } else { Ok(total) }
    }
}
