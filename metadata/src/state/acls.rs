//! ACL bindings per tenant (`crate::acl`): CreateAcls adds, DeleteAcls removes by filter.

use super::State;
use crate::acl::{AclBinding, AclFilter, AclResourceType};
use crate::command::{CommandError, Outcome};
use crate::limits::{ACL_COMMAND_ITEMS_MAX, ACL_COUNT_MAX};

impl State {
    /// Adds each valid binding; an invalid one is refused alone, as Kafka answers per creation.
    pub(super) fn create_acls(&mut self, tenant: String, bindings: Vec<AclBinding>) -> Result<Outcome, CommandError> {
        if bindings.len() > ACL_COMMAND_ITEMS_MAX {
            return Err(CommandError::LimitReached(format!("at most {ACL_COMMAND_ITEMS_MAX} ACLs per request")));
        }
        if !tenant.is_empty() && !self.tenants.contains_key(&tenant) {
            return Err(CommandError::CredentialNotFound(format!("tenant {tenant:?}")));
        }
        let mut count: usize = self.acls.values().map(|b| b.len()).sum();
        let mut results = Vec::with_capacity(bindings.len());
        for binding in bindings {
            let result = if let Some(why) = binding.invalid() {
                Err(CommandError::InvalidAcl(why))
            } else if !self.applies_format(8) && binding.is_group_config_acl() {
                Err(CommandError::InvalidAcl("ACLs on group configs need every metadata node on format 8".into()))
            } else if self.acls.get(&tenant).is_some_and(|b| b.contains(&binding)) {
                Ok(())
            } else if count >= ACL_COUNT_MAX {
                Err(CommandError::LimitReached(format!("at most {ACL_COUNT_MAX} ACLs")))
            } else if let Err(e) = self.check_table_quota(&tenant, super::TenantTable::Acls) {
                Err(e)
            } else {
                count += 1;
                self.acls.entry(tenant.clone()).or_default().insert(binding);
                Ok(())
            };
            results.push(result);
        }
        self.changed.access();
        Ok(Outcome::AclsCreated(results))
    }

    pub(super) fn delete_acls(&mut self, tenant: &str, filters: &[AclFilter]) -> Result<Outcome, CommandError> {
        if filters.len() > ACL_COMMAND_ITEMS_MAX {
            return Err(CommandError::LimitReached(format!("at most {ACL_COMMAND_ITEMS_MAX} filters per request")));
        }
        let Some(bindings) = self.acls.get_mut(tenant) else {
            return Ok(Outcome::AclsDeleted(vec![Vec::new(); filters.len()]));
        };
        // Each filter reports what it matched among the bindings before this command, as Kafka
        // does: two filters matching one binding both list it.
        let deleted: Vec<Vec<AclBinding>> =
            filters.iter().map(|f| bindings.iter().filter(|b| f.matches(b)).cloned().collect()).collect();
        bindings.retain(|b| !filters.iter().any(|f| f.matches(b)));
        if bindings.is_empty() {
            self.acls.remove(tenant);
        }
        self.changed.access();
        Ok(Outcome::AclsDeleted(deleted.into_iter().map(super::stored::each_into).collect()))
    }

    /// A tenant's bindings (`""`: the cluster's without tenants).
    pub fn tenant_acls(&self, tenant: &str) -> impl Iterator<Item = &AclBinding> + Clone {
        self.acls.get(tenant).into_iter().flatten()
    }

    /// What decides whether `principal` may act on the resource `name` of `resource_type`:
    /// the tenant's bindings that cover it and apply to `principal` (by name, or `User:*`),
    /// and for each pattern that covers it one binding of any principal, so that `acl::allows`
    /// still knows whether any binding covers the resource at all. Found by lookups in the
    /// ordered set (a few per prefix of `name`), not a scan: a check costs about the same with
    /// 100,000 bindings as with ten, however many of them name one resource.
    pub fn acls_for(
        &self,
        tenant: &str,
        resource_type: AclResourceType,
        name: &str,
        principal: &str,
    ) -> Vec<&AclBinding> {
        use crate::acl::AclPatternType::{Literal, Prefixed};
        let Some(bindings) = self.acls.get(tenant) else { return Vec::new() };
        let mut found = Vec::new();
        let mut group = |resource_name: &str, pattern_type: crate::acl::AclPatternType| {
            // The smallest binding of the group with `principal`: fields order bindings in
            // declaration order, and every field after it is at its smallest here.
            let first = |principal: &str| AclBinding {
                resource_type,
                resource_name: resource_name.to_owned(),
                pattern_type,
                principal: principal.to_owned(),
                host: String::new(),
                operation: crate::acl::AclOperation::All,
                permission: crate::acl::AclPermission::Deny,
            };
            let in_group = |b: &&AclBinding| {
                b.resource_type == resource_type && b.resource_name == resource_name && b.pattern_type == pattern_type
            };
            let Some(witness) = bindings.range(first("")..).next().filter(in_group) else { return };
            found.push(witness);
            let mut principals = vec![principal];
            if principal.starts_with("User:") && principal != crate::acl::ANY_USER {
                principals.push(crate::acl::ANY_USER);
            }
            for p in principals {
                let applying = bindings.range(first(p)..).take_while(|b| in_group(b) && b.principal == p);
                found.extend(applying.filter(|b| !std::ptr::eq(*b, witness)));
            }
        };
        group(name, Literal);
        if name != crate::acl::WILDCARD {
            group(crate::acl::WILDCARD, Literal);
        }
        for (end, _) in name.char_indices().skip(1) {
            group(&name[..end], Prefixed);
        }
        group(name, Prefixed);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclOperation, AclPatternType, AclPermission, AclResourceType, PatternFilter};
    use crate::command::Command;

    fn read(topic: &str, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: topic.into(),
            pattern_type: AclPatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    fn of(principal: &str) -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: Some(principal.into()),
            host: None,
            operation: None,
            permission: None,
        }
    }

    #[test]
    fn acls_are_per_tenant_and_go_with_it() {
        let mut state = State::default();
        for (i, name) in ["acme", "globex"].into_iter().enumerate() {
            let created = state.apply(i as u64 + 1, Command::CreateTenant { name: name.into(), now_ms: 1 });
            assert_eq!(created, Ok(Outcome::Done));
        }
        let mut bad = read("orders", "User:alice");
        bad.principal = "alice".into();
        let create = Command::CreateAcls {
            tenant: "acme".into(),
            bindings: vec![read("orders", "User:alice").into(), bad.into(), read("orders", "User:alice").into()],
        };
        let Ok(Outcome::AclsCreated(results)) = state.apply(3, create) else { panic!("applied") };
        assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok(), "{results:?}");
        assert_eq!(state.tenant_acls("acme").count(), 1, "a binding is kept once");
        let create = Command::CreateAcls { tenant: "globex".into(), bindings: vec![read("orders", "User:bob").into()] };
        assert!(state.apply(4, create).is_ok());
        let unknown = Command::CreateAcls { tenant: "initech".into(), bindings: vec![read("x", "User:x").into()] };
        assert!(state.apply(5, unknown).is_err());

        let delete = Command::DeleteAcls { tenant: "acme".into(), filters: vec![of("User:bob"), of("User:alice")] };
        let Ok(Outcome::AclsDeleted(deleted)) = state.apply(6, delete) else { panic!("applied") };
        assert_eq!((deleted[0].len(), deleted[1].len()), (0, 1), "bob's binding is another tenant's");
        assert_eq!(state.tenant_acls("acme").count(), 0);
        assert_eq!(state.tenant_acls("globex").count(), 1);
        assert_eq!(state.apply(7, Command::DeleteTenant { name: "globex".into() }), Ok(Outcome::Done));
        assert!(state.acls.is_empty());
    }

    fn arb_binding() -> impl proptest::strategy::Strategy<Value = AclBinding> {
        use proptest::prelude::*;
        let name = prop_oneof![Just("*".to_owned()), "[ab]{1,3}"];
        let pattern = prop_oneof![Just(AclPatternType::Literal), Just(AclPatternType::Prefixed)];
        let resource = prop_oneof![Just(AclResourceType::Topic), Just(AclResourceType::Group)];
        let operation = prop_oneof![Just(AclOperation::All), Just(AclOperation::Read), Just(AclOperation::Write)];
        let permission = prop_oneof![Just(AclPermission::Allow), Just(AclPermission::Deny)];
        let principal =
            prop_oneof![Just("User:alice".to_owned()), Just("User:*".to_owned()), Just("User:bob".to_owned())];
        (resource, name, pattern, principal, operation, permission).prop_map(
            |(resource_type, resource_name, pattern_type, principal, operation, permission)| AclBinding {
                resource_type,
                resource_name,
                pattern_type,
                principal,
                host: "*".into(),
                operation,
                permission,
            },
        )
    }

    proptest::proptest! {
        #[test]
        fn the_indexed_lookup_decides_as_a_scan_of_every_binding(
            bindings in proptest::collection::btree_set(arb_binding(), 0..40),
            name in "[ab]{1,4}",
            open in proptest::bool::ANY,
        ) {
            let mut state = State::default();
            state.acls.insert(String::new(), bindings);
            for resource_type in [AclResourceType::Topic, AclResourceType::Group] {
                for operation in [AclOperation::Read, AclOperation::Write, AclOperation::Describe] {
                    let decide = |bindings: Vec<&AclBinding>| {
                        crate::acl::allows(bindings.into_iter(), "User:alice", "h", operation, resource_type, &name, open)
                    };
                    let scanned = decide(state.tenant_acls("").collect());
                    proptest::prop_assert_eq!(decide(state.acls_for("", resource_type, &name, "User:alice")), scanned);
                }
            }
        }
    }
}
