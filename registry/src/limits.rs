//! Work budgets of the registry: bounds on what a schema or a record makes it do, beyond what
//! the sizes of the texts bound, each with the reason for its value. Past one, the schema is
//! refused (the registry's 42201) or the record is (a produce's INVALID_RECORD, an HTTP 422, a
//! table topic's dead-letter table), rather than worked on.
//!
//! The compatibility checks' budgets live with them: [`crate::avro::COMPARE_STEPS_MAX`] and the
//! JSON Schema check's 300,000 steps (both `SCHEMA_TOO_COMPLEX` past it).

/// Distinct regular expressions (`pattern` values and `patternProperties` names) one JSON Schema
/// and its references may hold. Each is compiled when the schema is parsed, and kept with it in
/// every agent's cache of parsed schemas, at up to [`JSON_PATTERN_BYTES_MAX`] apiece (and a
/// [`JSON_PATTERN_CACHE_BYTES_MAX`] matching cache per thread matching it): 256 bounds one
/// schema's compiled patterns at 256 MiB, where a 1 MiB text could otherwise hold 50,000.
pub const JSON_PATTERNS_MAX: usize = 256;
/// Size of one compiled JSON Schema pattern (the `regex` crate's `size_limit`, 10 MiB by
/// default); a larger one refuses the schema. `jsonschema` matches some simple forms (a literal
/// prefix, an alternation of literals, a repeated character class) without compiling them.
pub const JSON_PATTERN_BYTES_MAX: usize = 1024 * 1024;
/// Lazy DFA cache of one compiled pattern (the `regex` crate's `dfa_size_limit`, 2 MiB by
/// default). A pattern whose cache fills is matched by the slower engines, still in linear time.
pub const JSON_PATTERN_CACHE_BYTES_MAX: usize = 256 * 1024;

/// Steps validating one JSON instance may take: this many, plus
/// [`JSON_VALIDATION_STEPS_PER_VALUE`] per value of the instance (each array item, object member
/// and member name counts). A step is a subschema applied to a value, an entry of a keyword it
/// scans (`enum`, `required`, `properties`), or a pattern match's share (below). The validator
/// has no budget of its own and follows a `$ref` each time it meets one, so 30 definitions each
/// referring twice to the next apply 2^30 subschemas to the value `1`; counted first, such an
/// instance is refused in at most its budget's worth of steps.
pub const JSON_VALIDATION_STEPS_BASE: u64 = 100_000;
/// See [`JSON_VALIDATION_STEPS_BASE`]. A value of an ordinary schema takes a few steps (a `$ref`,
/// its target, a `oneOf` branch or two, the entries of a `properties` spread over its members);
/// sixteen leaves room for wide unions. An estimate from the schemas in the tests, not measured
/// on clients' schemas.
pub const JSON_VALIDATION_STEPS_PER_VALUE: u64 = 16;
/// Text bytes a pattern match or a `format` check reads per step, beyond the step it takes
/// anyway: a linear scan of a byte is far cheaper than applying a subschema (an estimate, not
/// measured).
pub const TEXT_BYTES_PER_STEP: usize = 16;
/// Steps charged, beyond the text it reads, for one match of a pattern the backtracking engine
/// runs (look-around, backreferences). Such a match stops at 10,000 backtracks, so a record of
/// many short strings could otherwise cost that many per string; the charge makes a record of
/// them a hundred times dearer than one of plain strings, not the full 10,000 (an estimate of a
/// backtrack's cost against a step's, not measured).
pub const BACKTRACKING_MATCH_STEPS: u64 = 100;
/// Subschemas applied inside one another while an instance's cost is counted (instance nesting,
/// at most 128 as parsed, times the subschemas applied at each level): the count recurses, and
/// a thread's stack must hold it.
pub const JSON_VALIDATION_DEPTH_MAX: usize = 512;

/// Subschemas one reference may name when a JSON Schema's cost graph is built: a `$dynamicRef`
/// may land on every subschema with its anchor, and an `$id` given to several subschemas names
/// them all. Each is an edge the parsed schema keeps, so a schema past it is refused.
pub const JSON_REFERENCE_TARGETS_MAX: usize = 64;

/// Bytes of names compiling one Protobuf schema with its references may build and look up
/// (prost-reflect): every enclosing package of a package (`a`, `a.b`, `a.b.c`), the full name
/// of everything defined, and for each name used relatively (a field's type, an extendee, a
/// method's types, a custom option) the full name of each scope it is looked for in, innermost
/// first. An ordinary schema's names are a small multiple of its text (each full name repeats
/// its package and parents); without a bound, a 20 KB `package` of 10,000 parts is 100 MB of
/// enclosing packages, and a 1 MiB text could be gigabytes.
pub const PROTOBUF_NAME_BYTES_MAX: usize = 64 * 1024 * 1024;
