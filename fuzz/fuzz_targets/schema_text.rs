#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| floe_fuzz::schema_text(data));
