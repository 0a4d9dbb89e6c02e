//! What one authorization costs at the largest ACL tables Floe takes (issue 52: the work an
//! input causes, not only its size). A check looks up the bindings that may cover the resource
//! (`State::acls_for`: one ordered-set lookup per prefix of its name) and weighs each
//! (`acl::allows`); an idempotent producer's check (`acl::allows_some`) reads every binding of
//! the tenant.
//!
//! - `cluster_100k`: the cluster's 100,000 bindings (`ACL_COUNT_MAX`) in one tenant, on topics
//!   named like the one checked (literal and prefixed), checked for a 249-byte topic name.
//! - `one_name_1k`: a tenant's 1,000 bindings (the default quota) all on `*` with 1,000
//!   principals, so every check weighs all of them.
//! - `allows_some_100k`: the idempotent producer's check over the 100,000.

use criterion::{Criterion, criterion_group, criterion_main};
use floe_metadata::acl::{self, AclBinding, AclOperation, AclPatternType, AclPermission, AclResourceType};
use floe_metadata::command::Command;
use floe_metadata::state::State;

const TOPIC_NAME_BYTES: usize = 249;

fn binding(name: String, pattern_type: AclPatternType, principal: String) -> AclBinding {
    AclBinding {
        resource_type: AclResourceType::Topic,
        resource_name: name,
        pattern_type,
        principal,
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    }
}

fn state_with(bindings: Vec<AclBinding>) -> State {
    let mut state = State::default();
    for (i, chunk) in bindings.chunks(1_000).enumerate() {
        let command =
            Command::CreateAcls { tenant: String::new(), bindings: chunk.iter().cloned().map(Into::into).collect() };
        state.apply(i as u64 + 1, command).expect("applies");
    }
    state
}

fn check(state: &State, principal: &str, name: &str) -> bool {
    let bindings = state.acls_for("", AclResourceType::Topic, name, principal);
    acl::allows(bindings.into_iter(), principal, "10.0.0.1", AclOperation::Read, AclResourceType::Topic, name, false)
}

fn bench(c: &mut Criterion) {
    let checked = "t".repeat(TOPIC_NAME_BYTES);
    // Names that share prefixes with the checked one (every length of it, literal and
    // prefixed), and others that do not.
    let cluster: Vec<AclBinding> = (0..100_000)
        .map(|i| {
            let (name, pattern) = match i % 4 {
                0 => (checked[..1 + i % TOPIC_NAME_BYTES].to_owned(), AclPatternType::Prefixed),
                1 => (checked[..1 + i % TOPIC_NAME_BYTES].to_owned(), AclPatternType::Literal),
                _ => (format!("other-{i}"), AclPatternType::Literal),
            };
            binding(name, pattern, format!("User:u{}", i % 997))
        })
        .collect();
    let cluster = state_with(cluster);
    let one_name =
        state_with((0..1_000).map(|i| binding("*".into(), AclPatternType::Literal, format!("User:u{i}"))).collect());

    let mut group = c.benchmark_group("acl_check");
    group.bench_function("cluster_100k", |b| b.iter(|| check(&cluster, "User:u5", &checked)));
    group.bench_function("one_name_1k", |b| b.iter(|| check(&one_name, "User:nobody", &checked)));
    group.bench_function("allows_some_100k", |b| {
        b.iter(|| {
            acl::allows_some(
                cluster.tenant_acls(""),
                "User:nobody",
                "10.0.0.1",
                AclOperation::Write,
                AclResourceType::Topic,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
