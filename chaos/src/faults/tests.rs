//! Which kinds a run draws by default.

use super::*;

#[test]
fn a_brownout_is_drawn_by_default_only_in_runs_with_room_for_it() {
    let short = FaultKind::defaults(Duration::from_secs(90));
    assert!(!short.contains(&FaultKind::ObjectStoreBrownout), "CI's 90 s run keeps its short kinds");
    assert_eq!(short.len(), FaultKind::all().len() - 1);
    assert!(FaultKind::defaults(Duration::from_secs(120)).contains(&FaultKind::ObjectStoreBrownout));
    assert!(FaultKind::all().iter().filter(|k| k.own_hold().is_some()).all(|k| k.class() == 2));
}
