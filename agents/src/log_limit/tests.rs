use std::time::Duration;

use super::*;

/// A flood at a call site writes its burst, then a line per interval, each counting the lines
/// dropped before it; a quiet call site earns its burst back.
#[test]
fn a_flood_writes_its_burst_then_a_counted_line_per_interval() {
    let limit = LogLimit::new();
    let start = Instant::now();
    let burst = u64::from(LOG_LINES_BURST);
    let written: Vec<Option<u64>> = (0..burst + 5).map(|_| limit.admit(start)).collect();
    assert!(written[..LOG_LINES_BURST as usize].iter().all(|w| *w == Some(0)), "{written:?}");
    assert!(written[LOG_LINES_BURST as usize..].iter().all(Option::is_none), "{written:?}");

    // Half an interval later still nothing; a whole one later a line counting the five dropped
    // and the one dropped at half an interval.
    assert_eq!(limit.admit(start + LOG_LINE_INTERVAL / 2), None);
    assert_eq!(limit.admit(start + LOG_LINE_INTERVAL), Some(6));
    assert_eq!(limit.admit(start + LOG_LINE_INTERVAL), None);

    // A minute of quiet fills the bucket again, and no more than that.
    let later = start + Duration::from_secs(60);
    let written = (0..burst + 1).filter(|_| limit.admit(later).is_some()).count();
    assert_eq!(written as u64, burst);
}

/// Issue 52's flood: 48,000 lines in 15 s from one call site become a burst and one a second.
#[test]
fn fifteen_seconds_of_3200_lines_a_second_write_about_35() {
    let limit = LogLimit::new();
    let start = Instant::now();
    let mut written = 0u64;
    let mut counted = 0u64;
    for i in 0..48_000u32 {
        let now = start + Duration::from_secs(15) * i / 48_000;
        if let Some(suppressed) = limit.admit(now) {
            written += 1;
            counted += suppressed;
        }
    }
    assert!(written <= u64::from(LOG_LINES_BURST) + 15, "{written} lines written");
    // Every line is written or counted, but for those dropped after the last line written.
    assert!(written + counted <= 48_000 && written + counted > 48_000 - 3_300, "{written} + {counted}");
}
