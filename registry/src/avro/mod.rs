//! Avro schemas: parsing (apache-avro), the canonical text ids are given for, and Avro's
//! schema-resolution rules as a compatibility check of a reader against a writer, reporting
//! every difference with its path as Confluent's registry words them.

use std::collections::{HashMap, HashSet};

use apache_avro::Schema;
use apache_avro::schema::{Name, RecordSchema, UnionSchema};

use crate::{Difference, DifferenceKind, SchemaError};

mod datum;
mod json;
mod value;

pub use datum::DATUM_DEPTH_MAX;

/// A parsed Avro schema and the named types its references define.
#[derive(Debug)]
pub struct AvroSchema {
    schema: Schema,
    /// Every named type, the schema's own and its references', by full name.
    names: HashMap<String, Schema>,
    canonical: String,
}

impl AvroSchema {
    /// Parses `text`; `references` are the texts of the schemas it refers to by name (each a
    /// named type: record, enum or fixed), in dependency order.
    pub fn parse(text: &str, references: &[&str]) -> Result<Self, SchemaError> {
        for t in references.iter().copied().chain([text]) {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(t) {
                refuse_lossy_fixed(&value)?;
                refuse_invalid_names(&value)?;
            }
        }
        let invalid = |e: apache_avro::Error| SchemaError::Invalid(format!("Invalid schema: {e}"));
        // apache-avro unwraps some names it builds (an alias joined to its namespace): names are
        // checked above, and a panic left in the parser refuses the schema instead of failing
        // the request.
        let parsed = std::panic::catch_unwind(|| {
            if references.is_empty() {
                Schema::parse_str(text).map(|s| (s, Vec::new()))
            } else {
                Schema::parse_str_with_list(text, references)
            }
        });
        let (schema, referenced) = parsed
            .map_err(|_| SchemaError::Invalid("Invalid schema: the Avro parser failed on it".into()))?
            .map_err(invalid)?;
        let canonical = serde_json::to_string(&schema)
            .map_err(|e| SchemaError::Invalid(format!("Invalid schema: cannot write it back: {e}")))?;
        let mut names = HashMap::new();
        for s in referenced.iter().chain([&schema]) {
            collect_names(s, &mut names);
        }
        Ok(Self { schema, names, canonical })
    }

    /// `text` with every `aliases` list sorted and deduplicated ([`crate::ParsedSchema::normalized_text`]);
    /// parsing it then gives the normalized canonical text.
    pub fn normalized_text(text: &str) -> Result<String, SchemaError> {
        fn sort_aliases(value: &mut serde_json::Value) {
            match value {
                serde_json::Value::Object(o) => {
                    if let Some(serde_json::Value::Array(aliases)) = o.get_mut("aliases")
                        && aliases.iter().all(serde_json::Value::is_string)
                    {
                        aliases.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                        aliases.dedup();
                    }
                    o.values_mut().for_each(sort_aliases);
                }
                serde_json::Value::Array(items) => items.iter_mut().for_each(sort_aliases),
                _ => {}
            }
        }
        let mut value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SchemaError::Invalid(format!("Invalid schema: {e}")))?;
        sort_aliases(&mut value);
        Ok(value.to_string())
    }

    /// Compact JSON written from the parsed schema (names qualified, keys in one order): equal
    /// schemas written differently (whitespace, key order, namespace spelled out or inherited)
    /// get one text, so one id.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The full name of the schema's top-level named type, if it is one (RecordNameStrategy).
    pub fn full_name(&self) -> Option<String> {
        match &self.schema {
            Schema::Record(r) => Some(r.name.fullname(None)),
            Schema::Enum(e) => Some(e.name.fullname(None)),
            Schema::Fixed(f) => Some(f.name.fullname(None)),
            _ => None,
        }
    }

    /// Checks that `bytes` is exactly one datum of this schema in Avro's binary encoding (as a
    /// Confluent serializer writes it after the 5-byte header), naming the first problem found.
    /// Nesting is bounded by [`DATUM_DEPTH_MAX`] and work by the datum's size.
    pub fn check_datum(&self, bytes: &[u8]) -> Result<(), String> {
        datum::Datum::new(&self.names, bytes).check(&self.schema)
    }

    /// A JSON value (Avro's JSON encoding, or with unions unwrapped) as one datum in Avro's
    /// binary encoding; errors name where in the value it does not fit.
    pub fn encode_json(&self, value: &serde_json::Value) -> Result<Vec<u8>, String> {
        json::Encoder::new(&self.names).encode(&self.schema, value)
    }

    /// One datum in Avro's binary encoding as Avro's JSON encoding, bounded as
    /// [`AvroSchema::check_datum`] is.
    pub fn decode_json(&self, bytes: &[u8]) -> Result<serde_json::Value, String> {
        datum::Datum::new(&self.names, bytes).into_json(&self.schema)
    }

    /// One datum in Avro's binary encoding as apache-avro's `Value`, bounded as
    /// [`AvroSchema::check_datum`] is; logical types keep their physical values.
    pub fn decode_value(&self, bytes: &[u8]) -> Result<apache_avro::types::Value, String> {
        datum::Datum::new(&self.names, bytes).into_value(&self.schema)
    }

    /// The parsed schema.
    pub fn root(&self) -> &Schema {
        &self.schema
    }

    /// The named type a reference names (the schema's own, or one of its references').
    pub fn named(&self, full_name: &str) -> Option<&Schema> {
        self.names.get(full_name)
    }

    /// Whether data written with `writer` can be read with this schema: empty when it can,
    /// else every difference found.
    pub fn can_read(&self, writer: &AvroSchema) -> Vec<Difference> {
        self.can_read_within(writer, COMPARE_STEPS_MAX).0
    }

    /// [`AvroSchema::can_read`] in at most `steps_max` steps ([`COMPARE_STEPS_MAX`]), with the
    /// steps it took: a check that needs more is `SCHEMA_TOO_COMPLEX` alone, since what was
    /// found before the cut may be the cut's doing (a union branch left unread).
    pub(crate) fn can_read_within(&self, writer: &AvroSchema, steps_max: usize) -> (Vec<Difference>, usize) {
        let mut check = Check::new(self, writer, steps_max);
        check.compare(&self.schema, &writer.schema, "");
        let steps = steps_max - check.steps_left;
        if check.steps_left == 0 {
            check.found = vec![Difference {
                kind: DifferenceKind::SchemaTooComplex.name(),
                path: "/".into(),
                description: format!("comparing the schemas needs more than {steps_max} steps"),
            }];
        }
        (check.found, steps)
    }
}

/// apache-avro 0.21 reads a `fixed` with logical type `uuid` as a string uuid (and a `duration`
/// of any size as 12 bytes), so its canonical text and a datum check would describe other
/// data than the writers': such schemas are refused rather than stored wrong.
fn refuse_lossy_fixed(value: &serde_json::Value) -> Result<(), SchemaError> {
    match value {
        serde_json::Value::Object(o) => {
            if o.get("type").and_then(serde_json::Value::as_str) == Some("fixed") {
                let logical = o.get("logicalType").and_then(serde_json::Value::as_str);
                let size = o.get("size").and_then(serde_json::Value::as_u64);
                if logical == Some("uuid") || (logical == Some("duration") && size != Some(12)) {
                    return Err(SchemaError::Invalid(format!(
                        "Invalid schema: a fixed with logicalType {} is not supported (use a string uuid, or a duration of size 12)",
                        logical.unwrap_or_default()
                    )));
                }
            }
            o.values().try_for_each(refuse_lossy_fixed)
        }
        serde_json::Value::Array(items) => items.iter().try_for_each(refuse_lossy_fixed),
        _ => Ok(()),
    }
}

/// Refuses names, namespaces and aliases of named types that are not Avro names (dotted
/// `[A-Za-z_][A-Za-z0-9_]*` parts): apache-avro 0.21 panics on some of them.
fn refuse_invalid_names(value: &serde_json::Value) -> Result<(), SchemaError> {
    fn part(p: &str) -> bool {
        p.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
    fn full_name(name: &str) -> bool {
        name.split('.').all(part)
    }
    let refuse = |what: &str, name: &str| {
        let shown: String = name.chars().take(64).collect();
        Err(SchemaError::Invalid(format!("Invalid schema: {what} {shown:?} is not an Avro name")))
    };
    match value {
        serde_json::Value::Object(o) => {
            let named = o.get("type").and_then(serde_json::Value::as_str);
            if matches!(named, Some("record" | "error" | "enum" | "fixed")) {
                if let Some(name) = o.get("name").and_then(serde_json::Value::as_str)
                    && !full_name(name)
                {
                    return refuse("name", name);
                }
                // A namespace is joined to each alias (the unwrap that panics); without aliases
                // it is left to the parser, as before.
                if let Some(ns) = o.get("namespace").and_then(serde_json::Value::as_str)
                    && !ns.is_empty()
                    && !full_name(ns)
                    && o.get("aliases").is_some()
                {
                    return refuse("namespace", ns);
                }
                for alias in o.get("aliases").and_then(serde_json::Value::as_array).into_iter().flatten() {
                    if let Some(alias) = alias.as_str()
                        && !full_name(alias)
                    {
                        return refuse("alias", alias);
                    }
                }
            }
            // A field's default is a value, not a schema, whatever it looks like.
            o.iter().filter(|(k, _)| k.as_str() != "default").try_for_each(|(_, v)| refuse_invalid_names(v))
        }
        serde_json::Value::Array(items) => items.iter().try_for_each(refuse_invalid_names),
        _ => Ok(()),
    }
}

fn collect_names(schema: &Schema, names: &mut HashMap<String, Schema>) {
    match schema {
        Schema::Record(r) => {
            names.insert(r.name.fullname(None), schema.clone());
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(e.name.fullname(None), schema.clone());
        }
        Schema::Fixed(f) => {
            names.insert(f.name.fullname(None), schema.clone());
        }
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => u.variants().iter().for_each(|v| collect_names(v, names)),
        Schema::Decimal(d) => collect_names(&d.inner, names),
        _ => {}
    }
}

/// What a schema is for resolution: logical types resolve as their underlying type (Avro's
/// rules ignore logical types), references as the type they name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array,
    Map,
    Union,
    Record,
    Enum,
    Fixed,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Int => "int",
            Kind::Long => "long",
            Kind::Float => "float",
            Kind::Double => "double",
            Kind::Bytes => "bytes",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Map => "map",
            Kind::Union => "union",
            Kind::Record => "record",
            Kind::Enum => "enum",
            Kind::Fixed => "fixed",
        }
    }

    pub(super) fn of(schema: &Schema) -> Kind {
        match schema {
            Schema::Null => Kind::Null,
            Schema::Boolean => Kind::Boolean,
            Schema::Int | Schema::Date | Schema::TimeMillis => Kind::Int,
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => Kind::Long,
            Schema::Float => Kind::Float,
            Schema::Double => Kind::Double,
            Schema::Bytes | Schema::BigDecimal | Schema::Decimal(_) => Kind::Bytes,
            Schema::String | Schema::Uuid => Kind::String,
            Schema::Array(_) => Kind::Array,
            Schema::Map(_) => Kind::Map,
            Schema::Union(_) => Kind::Union,
            Schema::Record(_) => Kind::Record,
            Schema::Enum(_) => Kind::Enum,
            Schema::Fixed(_) | Schema::Duration => Kind::Fixed,
            // Unresolved (the parser refuses unknown names, so not reached).
            Schema::Ref { .. } => Kind::Record,
        }
    }

    /// Avro's promotions: what a reader of kind `self` may read when written as `writer`.
    fn promotes_from(self, writer: Kind) -> bool {
        matches!(
            (writer, self),
            (Kind::Int, Kind::Long | Kind::Float | Kind::Double)
                | (Kind::Long, Kind::Float | Kind::Double)
                | (Kind::Float, Kind::Double)
                | (Kind::String, Kind::Bytes)
                | (Kind::Bytes, Kind::String)
        )
    }
}

/// Steps one compatibility check may take: a comparison of two schemas, a writer record's field
/// indexed, and a record pair's verdict carried to an enclosing pair's assumptions are one each.
/// Each record pair is compared once in the reporting walk and about once in union trials, so a
/// schema of a million fields (far past the 1 MiB text bound) fits; past it the schemas are
/// reported as too complex to compare (`SCHEMA_TOO_COMPLEX`), as JSON Schema's check does.
pub const COMPARE_STEPS_MAX: usize = 1_000_000;
/// Differences one check reports; the first ones say enough, and each may quote a schema.
const DIFFERENCES_MAX: usize = 100;

/// A pair of named record types: (the reader's full name, the writer's full name).
type RecordPair = (String, String);

struct Check<'a> {
    reader_names: &'a HashMap<String, Schema>,
    writer_names: &'a HashMap<String, Schema>,
    /// Record pairs the reporting walk has entered: each is reported on once, at the first path
    /// that reaches it, and a recursive type is compatible with itself unless some other path
    /// says otherwise.
    seen: HashSet<RecordPair>,
    trial: Trial,
    steps_left: usize,
    found: Vec<Difference>,
}

/// Union trials: whether a reader branch reads a writer branch, asked without reporting. Record
/// pairs met in trials keep their verdicts for the whole check, so a record type shared through
/// unions is compared once, not once per path to it (a `T_i` with two `["null", T_{i+1}]`
/// fields, `d` deep, would otherwise be compared `2^d` times).
///
/// A pair met again while it is being compared (a recursive type) is assumed readable, Avro's
/// rule. A verdict reached on that assumption is kept as certain only when the pairs it assumed
/// were the pair itself or pairs compared inside it; otherwise it is provisional, valid while
/// the pairs it assumed are still being compared, and made certain or dropped when the
/// outermost of them gets its own verdict. A pair found unreadable is unreadable whatever was
/// assumed, since assuming readable only ever hides differences.
#[derive(Default)]
struct Trial {
    /// Trials nested at this point: inside one a difference fails it instead of being reported.
    depth: usize,
    /// Whether the innermost trial or record pair being compared has found a difference.
    failed: bool,
    /// Verdicts known for certain: whether the reader record reads every writer record.
    verdicts: HashMap<RecordPair, bool>,
    /// The pairs being compared, each with its depth in this stack.
    comparing: HashMap<RecordPair, usize>,
    /// Pairs found readable assuming the pairs being compared at that depth and deeper.
    provisional: HashMap<RecordPair, usize>,
    /// The keys of `provisional` in the order they were found, so a pair's comparison finds
    /// those found inside it at the end.
    provisional_order: Vec<RecordPair>,
    /// The shallowest depth in `comparing` that the pair being compared has assumed readable.
    assumed: usize,
}

impl<'a> Check<'a> {
    fn new(reader: &'a AvroSchema, writer: &'a AvroSchema, steps_max: usize) -> Self {
        Check {
            reader_names: &reader.names,
            writer_names: &writer.names,
            seen: HashSet::new(),
            trial: Trial::default(),
            steps_left: steps_max,
            found: Vec::new(),
        }
    }

    fn resolve<'s>(names: &'s HashMap<String, Schema>, schema: &'s Schema) -> &'s Schema {
        match schema {
            Schema::Ref { name } => names.get(&name.fullname(None)).unwrap_or(schema),
            Schema::Decimal(d) => Self::resolve(names, &d.inner),
            _ => schema,
        }
    }

    /// Takes `steps` from the budget; false once it is spent, which fails the trial under way
    /// (the check's result is then `SCHEMA_TOO_COMPLEX` alone).
    fn spend(&mut self, steps: usize) -> bool {
        self.steps_left = self.steps_left.saturating_sub(steps);
        if self.steps_left == 0 {
            self.trial.failed = true;
        }
        self.steps_left > 0
    }

    /// Records a difference, or inside a trial fails it; `description` is written only for a
    /// difference kept.
    fn report(&mut self, kind: DifferenceKind, path: &str, description: impl FnOnce() -> String) {
        if self.trial.depth > 0 {
            self.trial.failed = true;
        } else if self.found.len() < DIFFERENCES_MAX {
            let path = if path.is_empty() { "/".to_owned() } else { path.to_owned() };
            self.found.push(Difference { kind: kind.name(), path, description: description() });
        }
    }

    /// Whether `reader` reads everything `writer` writes (without recording differences).
    fn quietly(&mut self, reader: &Schema, writer: &Schema) -> bool {
        let failed_outside = std::mem::replace(&mut self.trial.failed, false);
        self.trial.depth += 1;
        self.compare(reader, writer, "");
        self.trial.depth -= 1;
        let readable = !self.trial.failed;
        self.trial.failed = failed_outside;
        if self.trial.depth == 0 {
            debug_assert!(self.trial.comparing.is_empty() && self.trial.provisional.is_empty());
        }
        readable
    }

    /// Whether some branch of the reader's union reads `writer` (not a union: Avro has no unions
    /// directly in unions), trying the branch at `hint` first: the writer's own position in its
    /// union, since unions mostly keep their order, so comparing a union of `n` records with
    /// itself takes `n` trials, not `n^2 / 2`.
    fn some_branch_reads(&mut self, reader: &UnionSchema, writer: &Schema, hint: usize) -> bool {
        let branches = reader.variants();
        let (earlier, from_hint) = branches.split_at(hint.min(branches.len()));
        from_hint.iter().chain(earlier).any(|branch| self.quietly(branch, writer))
    }

    fn compare(&mut self, reader: &Schema, writer: &Schema, path: &str) {
        if !self.spend(1) {
            return;
        }
        let reader = Self::resolve(self.reader_names, reader);
        let writer = Self::resolve(self.writer_names, writer);
        let (rk, wk) = (Kind::of(reader), Kind::of(writer));
        // A writer union is read branch by branch: every branch must be readable.
        if let Schema::Union(w) = writer {
            for (i, branch) in w.variants().iter().enumerate() {
                let read = match reader {
                    Schema::Union(r) => self.some_branch_reads(r, branch, i),
                    _ => false,
                };
                if !read {
                    if let Schema::Union(_) = reader {
                        self.report(DifferenceKind::MissingUnionBranch, &format!("{path}/{i}"), || {
                            format!(
                                "The new schema is missing a type inside a union field at path '{path}/{i}' in the old schema: {}",
                                describe(branch)
                            )
                        });
                    } else {
                        self.compare(reader, branch, &format!("{path}/{i}"));
                    }
                }
            }
            return;
        }
        if let Schema::Union(r) = reader {
            if !self.some_branch_reads(r, writer, 0) {
                self.report(DifferenceKind::MissingUnionBranch, path, || {
                    format!(
                        "The new schema is missing a type inside a union field at path '{}' in the old schema: {}",
                        if path.is_empty() { "/" } else { path },
                        describe(writer)
                    )
                });
            }
            return;
        }
        if rk != wk {
            if !rk.promotes_from(wk) {
                self.report(DifferenceKind::TypeMismatch, path, || {
                    format!(
                        "The type (path '{}') of a field in the new schema does not match with the old schema: {} cannot read {}",
                        if path.is_empty() { "/" } else { path },
                        rk.name(),
                        wk.name()
                    )
                });
            }
            return;
        }
        match (reader, writer) {
            (Schema::Record(r), Schema::Record(w)) => self.compare_records(r, w, path),
            (Schema::Enum(r), Schema::Enum(w)) => {
                if !names_match(&r.name, r.aliases.as_deref(), &w.name) {
                    self.name_mismatch(path, &r.name, &w.name);
                    return;
                }
                let missing: Vec<&str> =
                    w.symbols.iter().filter(|s| !r.symbols.contains(s)).map(String::as_str).collect();
                if !missing.is_empty() && r.default.is_none() {
                    self.report(DifferenceKind::MissingEnumSymbols, &format!("{path}/symbols"), || {
                        format!(
                            "The new schema is missing enum symbols '[{}]' at path '{path}/symbols' in the old schema",
                            missing.join(", ")
                        )
                    });
                }
            }
            (Schema::Fixed(r), Schema::Fixed(w)) => {
                if !names_match(&r.name, r.aliases.as_deref(), &w.name) {
                    self.name_mismatch(path, &r.name, &w.name);
                } else if r.size != w.size {
                    self.report(DifferenceKind::FixedSizeMismatch, &format!("{path}/size"), || {
                        format!(
                            "The size of FIXED type field at path '{path}/size' in the new schema does not match with the old schema: expected {}, found {}",
                            w.size, r.size
                        )
                    });
                }
            }
            (Schema::Array(r), Schema::Array(w)) => self.compare(&r.items, &w.items, &format!("{path}/items")),
            (Schema::Map(r), Schema::Map(w)) => self.compare(&r.types, &w.types, &format!("{path}/values")),
            // The duration logical type against a fixed (or itself): only the size matters.
            (Schema::Duration, Schema::Fixed(f)) | (Schema::Fixed(f), Schema::Duration) if f.size != 12 => {
                self.report(DifferenceKind::FixedSizeMismatch, &format!("{path}/size"), || {
                    format!("The size of FIXED type field at path '{path}/size' does not match: 12 against {}", f.size)
                })
            }
            _ => {}
        }
    }

    fn name_mismatch(&mut self, path: &str, reader: &Name, writer: &Name) {
        self.report(DifferenceKind::NameMismatch, &format!("{path}/name"), || {
            format!(
                "The name of the schema has changed (path '{path}/name'): expected {}, found {}",
                writer.fullname(None),
                reader.fullname(None)
            )
        });
    }

    fn compare_records(&mut self, r: &RecordSchema, w: &RecordSchema, path: &str) {
        if !names_match(&r.name, r.aliases.as_deref(), &w.name) {
            self.name_mismatch(path, &r.name, &w.name);
            return;
        }
        let pair = (r.name.fullname(None), w.name.fullname(None));
        if self.trial.depth > 0 {
            self.try_records(pair, r, w);
        } else if self.seen.insert(pair) {
            self.compare_fields(r, w, path);
        }
    }

    /// Inside a trial: whether `r` reads every `w`, from what is known of the pair, else by
    /// comparing their fields (see [`Trial`]).
    fn try_records(&mut self, pair: RecordPair, r: &RecordSchema, w: &RecordSchema) {
        let trial = &mut self.trial;
        if let Some(&readable) = trial.verdicts.get(&pair) {
            trial.failed |= !readable;
            return;
        }
        if let Some(&depth) = trial.comparing.get(&pair).or_else(|| trial.provisional.get(&pair)) {
            trial.assumed = trial.assumed.min(depth);
            return;
        }
        let depth = trial.comparing.len();
        trial.comparing.insert(pair.clone(), depth);
        let provisional_from = trial.provisional_order.len();
        let failed_outside = std::mem::replace(&mut trial.failed, false);
        let assumed_outside = std::mem::replace(&mut trial.assumed, usize::MAX);

        self.compare_fields(r, w, "");

        let trial = &mut self.trial;
        trial.comparing.remove(&pair);
        let readable = !trial.failed;
        let assumed = trial.assumed;
        let found_inside = trial.provisional_order.len() - provisional_from;
        if !readable {
            // What was found readable inside may have assumed this pair readable.
            for inside in trial.provisional_order.drain(provisional_from..) {
                trial.provisional.remove(&inside);
            }
            trial.verdicts.insert(pair, false);
        } else if assumed >= depth {
            // Every assumption made inside held: those verdicts are certain too.
            for inside in trial.provisional_order.drain(provisional_from..) {
                trial.provisional.remove(&inside);
                trial.verdicts.insert(inside, true);
            }
            trial.verdicts.insert(pair, true);
        } else {
            // Readable if the pairs still being compared from depth `assumed` on are; so is
            // what was found inside, which may have assumed this pair.
            for inside in &trial.provisional_order[provisional_from..] {
                if let Some(from) = trial.provisional.get_mut(inside) {
                    *from = assumed;
                }
            }
            trial.provisional.insert(pair.clone(), assumed);
            trial.provisional_order.push(pair);
        }
        trial.assumed = assumed.min(assumed_outside);
        trial.failed = failed_outside || !readable;
        if readable && assumed < depth {
            self.spend(found_inside);
        }
    }

    fn compare_fields(&mut self, r: &RecordSchema, w: &RecordSchema, path: &str) {
        if !self.spend(w.fields.len()) {
            return;
        }
        // The writer's fields by name, the first of a name kept.
        let written: HashMap<&str, usize> =
            w.fields.iter().enumerate().rev().map(|(i, f)| (f.name.as_str(), i)).collect();
        for (i, field) in r.fields.iter().enumerate() {
            let aliases = field.aliases.as_deref().unwrap_or(&[]);
            // The first writer field named as this field or one of its aliases.
            let wf = std::iter::once(&field.name)
                .chain(aliases)
                .filter_map(|name| written.get(name.as_str()).copied())
                .min()
                .map(|position| &w.fields[position]);
            let field_path = format!("{path}/fields/{i}");
            match wf {
                Some(wf) => self.compare(&field.schema, &wf.schema, &format!("{field_path}/type")),
                None if field.default.is_none() => {
                    self.report(DifferenceKind::ReaderFieldMissingDefaultValue, &field_path, || {
                        format!(
                            "The field '{}' at path '{field_path}' in the new schema has no default value and is missing in the old schema",
                            field.name
                        )
                    })
                }
                None => {}
            }
            if self.steps_left == 0 {
                return;
            }
        }
    }
}

/// Named types match by full name, or when a reader alias names the writer's type.
fn names_match(reader: &Name, aliases: Option<&[apache_avro::schema::Alias]>, writer: &Name) -> bool {
    let writer = writer.fullname(None);
    reader.fullname(None) == writer
        || aliases.unwrap_or(&[]).iter().any(|a| a.fullname(reader.namespace.clone()) == writer)
}

fn describe(schema: &Schema) -> String {
    serde_json::to_string(schema).unwrap_or_else(|_| format!("{schema:?}"))
}
