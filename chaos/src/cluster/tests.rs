//! How a process's end is told apart: an exit of its own is kept for the verdict, the harness's
//! own SIGKILL is not.

use super::*;

/// A process that runs `script` with /bin/sh in place of `floe`.
fn shell(name: &str, script: &str) -> Proc {
    Proc {
        name: name.into(),
        host: Host { name: name.into(), ip: "127.0.0.1".into(), netns: None, port_offset: 0 },
        args: vec!["-c".into(), script.into()],
        env: Vec::new(),
        floe: PathBuf::from("/bin/sh"),
        log: std::env::temp_dir().join(format!("floe-chaos-proc-{}-{name}.log", std::process::id())),
        child: None,
        paused: false,
        exits: Vec::new(),
    }
}

#[test]
fn an_exit_of_its_own_is_kept_and_the_harness_kill_is_not() {
    let mut crashing = shell("crashing", "exit 3");
    crashing.start().expect("starts");
    let started = std::time::Instant::now();
    while crashing.alive() {
        assert!(started.elapsed() < Duration::from_secs(10), "sh exits at once");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(crashing.exits.iter().map(ExitStatus::code).collect::<Vec<_>>(), [Some(3)]);

    let mut killed = shell("killed", "sleep 60");
    killed.start().expect("starts");
    assert!(killed.alive());
    killed.start().expect("a running process is left alone");
    killed.sigkill();
    assert!(!killed.alive());
    assert!(killed.exits.is_empty(), "the harness's SIGKILL is not an exit of its own");

    for p in [crashing, killed] {
        let _ = std::fs::remove_file(&p.log);
    }
}
