//! Replays every input kept under `fuzz/regressions/TARGET/` (seeds and every crash a fuzzer
//! ever found, fixed since) through the same target bodies `cargo fuzz` runs, so a fixed crash
//! stays fixed in `.ci/run` without a nightly toolchain.

// The bodies are `pub` for the fuzz crate, which uses them from outside.
#[allow(unreachable_pub)]
#[path = "../fuzz/targets.rs"]
mod targets;

fn replay(target: &str, run: fn(&[u8])) {
    // The runner's CARGO_MANIFEST_DIR first: a binary reused from another checkout keeps its
    // compile-time path.
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
    let dir = root.join("fuzz/regressions").join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        run(&data);
        inputs += 1;
    }
    assert!(inputs > 0, "{} holds no inputs", dir.display());
}

#[test]
fn kafka_request() {
    replay("kafka_request", targets::kafka_request);
}

#[test]
fn record_batch() {
    replay("record_batch", targets::record_batch);
}

#[test]
fn segment_footer() {
    replay("segment_footer", targets::segment_footer);
}

#[test]
fn metadata_command() {
    replay("metadata_command", targets::metadata_command);
}

#[test]
fn http_records() {
    replay("http_records", targets::http_records);
}

#[test]
fn avro_datum() {
    replay("avro_datum", targets::avro_datum);
}

#[test]
fn schema_text() {
    replay("schema_text", targets::schema_text);
}

#[test]
fn registry_body() {
    replay("registry_body", targets::registry_body);
}
