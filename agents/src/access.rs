//! Who a request acts as and what its ACLs let it do, for both listeners. With `--authorizer`
//! every Kafka request and HTTP call is checked against the ACL bindings of the caller's tenant
//! (`floe_metadata::acl`), by the names the caller uses; super users skip the check. Without an
//! authorizer there is no `Access` and everything authenticated is allowed, as in Kafka without
//! `authorizer.class.name`.

use std::net::IpAddr;

use floe_metadata::State;
use floe_metadata::acl::{self, AclOperation, AclResourceType};

/// The agent's authorizer settings.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerConfig {
    /// Kafka's `allow.everyone.if.no.acl.found`: a resource no ACL names is open to everyone.
    pub allow_if_no_acl: bool,
}

/// One caller's identity for the authorizer.
#[derive(Clone, Debug)]
pub struct Access {
    /// `User:NAME`, or `User:ANONYMOUS` without authentication.
    principal: String,
    /// The tenant whose bindings apply; `""` for a cluster without tenants.
    tenant: String,
    /// The client's IP address, for bindings with a host.
    host: String,
    super_user: bool,
    allow_if_no_acl: bool,
}

impl Access {
    /// The caller's access, or `None` when this agent authorizes nothing. `user` and `tenant`
    /// are `None` for a client that did not authenticate.
    pub fn new(config: &crate::AgentConfig, user: Option<&str>, tenant: Option<&str>, peer: IpAddr) -> Option<Self> {
        let authorizer = config.authorizer.as_ref()?;
        Some(Self::with(authorizer, &config.super_users, user, tenant, peer))
    }

    pub fn with(
        authorizer: &AuthorizerConfig,
        super_users: &[String],
        user: Option<&str>,
        tenant: Option<&str>,
        peer: IpAddr,
    ) -> Self {
        Self {
            principal: user.map_or_else(|| acl::ANONYMOUS.to_owned(), |u| format!("User:{u}")),
            tenant: tenant.unwrap_or_default().to_owned(),
            host: peer.to_string(),
            super_user: user.is_some_and(|u| super_users.iter().any(|s| s == u)),
            allow_if_no_acl: authorizer.allow_if_no_acl,
        }
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Whether the caller may do `operation` on the resource it calls `name`.
    pub fn allows(&self, state: &State, operation: AclOperation, resource_type: AclResourceType, name: &str) -> bool {
        self.super_user || {
            let (principal, host) = (&self.principal, &self.host);
            let bindings = state.acls_for(&self.tenant, resource_type, name, principal);
            acl::allows(bindings.into_iter(), principal, host, operation, resource_type, name, self.allow_if_no_acl)
        }
    }

    /// Whether the caller may do `operation` on the cluster (its tenant's virtual cluster).
    pub fn allows_cluster(&self, state: &State, operation: AclOperation) -> bool {
        self.allows(state, operation, AclResourceType::Cluster, acl::CLUSTER_RESOURCE_NAME)
    }

    /// Whether the caller may do `operation` on some resource of `resource_type`.
    pub fn allows_some(&self, state: &State, operation: AclOperation, resource_type: AclResourceType) -> bool {
        self.super_user
            || self.allow_if_no_acl && state.tenant_acls(&self.tenant).next().is_none()
            || acl::allows_some(state.tenant_acls(&self.tenant), &self.principal, &self.host, operation, resource_type)
    }
}
