//! ACL copying (`LinkConfig::acls`): each refresh, the bindings here on the link's topics and
//! groups (those its patterns match, literal or prefixed, in its tenant's or the cluster's
//! bindings) are made the source's. A binding added here on such a resource is replaced while
//! the link mirrors; after a promotion they are this cluster's to change.

use std::collections::BTreeSet;

use floe_metadata::acl::{AclBinding, AclFilter, AclResourceType, PatternFilter};
use floe_metadata::state::stored::each_into;
use floe_metadata::{Command, NodeError, Outcome};

use super::{LinkWorker, compile_pattern, pattern_matches};
use crate::Agent;
use crate::kafka::{KafkaAcl, binding_of};

/// Bindings one refresh adds or removes at most; the next refresh goes on.
const ACL_CHANGES_PER_ROUND_MAX: usize = 1_000;

/// Makes the bindings here on the link's resources the source's; `Err` says what failed, for the
/// link's status (mirroring goes on).
pub(super) async fn copy_acls(agent: &Agent, name: &str, worker: &mut LinkWorker) -> Result<(), String> {
    let topics = compile_pattern(&worker.config.topics)?;
    let groups = worker.config.groups.as_deref().map(compile_pattern).transpose()?;
    let covered = |b: &AclBinding| match b.resource_type {
        AclResourceType::Topic => pattern_matches(&topics, &b.resource_name),
        AclResourceType::Group => groups.as_ref().is_some_and(|g| pattern_matches(g, &b.resource_name)),
        _ => false,
    };
    let Some(source) = worker.source.as_mut() else { return Ok(()) };
    let at_source = source.describe_acls().await.map_err(|e| format!("reading the source's ACLs: {e}"))?;
    let wanted: BTreeSet<AclBinding> = at_source
        .iter()
        .filter_map(|a| {
            binding_of(KafkaAcl {
                resource_type: a.resource_type,
                resource_name: &a.resource_name,
                pattern_type: a.pattern_type,
                principal: &a.principal,
                host: &a.host,
                operation: a.operation,
                permission: a.permission,
            })
            .ok()
        })
        .filter(|b| covered(b) && b.invalid().is_none())
        .collect();
    let tenant = worker.config.tenant.clone().unwrap_or_default();
    let (add, remove): (Vec<AclBinding>, Vec<AclBinding>) = {
        let state = agent.metadata.read();
        let here: BTreeSet<&AclBinding> =
            state.acls.get(&tenant).into_iter().flatten().filter(|b| covered(b)).collect();
        let add = wanted.iter().filter(|b| !here.contains(b)).take(ACL_CHANGES_PER_ROUND_MAX).cloned().collect();
        let remove = here
            .iter()
            .filter(|b| !wanted.contains(**b))
            .take(ACL_CHANGES_PER_ROUND_MAX)
            .map(|b| (*b).clone())
            .collect();
        (add, remove)
    };
    if !remove.is_empty() {
        let filters = remove.iter().map(exactly).collect();
        agent
            .metadata
            .propose(Command::DeleteAcls { tenant: tenant.clone(), filters })
            .await
            .map_err(|e| format!("removing ACLs the source no longer has: {e}"))?;
        tracing::info!(link = %name, removed = remove.len(), "ACLs the source no longer has removed");
    }
    if !add.is_empty() {
        let count = add.len();
        match agent.metadata.propose(Command::CreateAcls { tenant, bindings: each_into(add) }).await {
            Ok(Outcome::AclsCreated(results)) => {
                if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                    return Err(format!("copying the source's ACLs: {e}"));
                }
            }
            Ok(other) => return Err(format!("unexpected outcome of copying ACLs: {other:?}")),
            Err(NodeError::Rejected(e)) => return Err(format!("copying the source's ACLs: {e}")),
            Err(e) => return Err(e.to_string()),
        }
        tracing::info!(link = %name, added = count, "the source's ACLs copied");
    }
    Ok(())
}

/// The filter selecting `binding` alone.
fn exactly(binding: &AclBinding) -> AclFilter {
    AclFilter {
        resource_type: Some(binding.resource_type),
        resource_name: Some(binding.resource_name.clone()),
        pattern: PatternFilter::Exactly(binding.pattern_type),
        principal: Some(binding.principal.clone()),
        host: Some(binding.host.clone()),
        operation: Some(binding.operation),
        permission: Some(binding.permission),
    }
}
