//! Kafka's ACL model and its authorizer, without I/O: a binding allows or denies a principal
//! (`User:alice`, `User:*`) from a host (an IP address, or `*`) one operation on the resources
//! a pattern covers (a literal name, `*` for every name, or a name prefix).
//!
//! A request is allowed when no binding covering it denies it and one allows it, as Kafka's
//! `StandardAuthorizer` decides: a deny wins over any allow; `All` stands for every operation;
//! `Describe` is allowed by `Read`, `Write`, `Delete` or `Alter`, and `DescribeConfigs` by
//! `AlterConfigs`. A resource no binding covers at all is allowed only when the operator said so
//! (`allow.everyone.if.no.acl.found`). Each tenant has its own bindings, on the names its clients
//! use (`crate::namespace`): a tenant's cluster resource is its virtual cluster.

use serde::{Deserialize, Serialize};

use crate::limits::{ACL_HOST_BYTES_MAX, ACL_PRINCIPAL_BYTES_MAX, ACL_RESOURCE_NAME_BYTES_MAX};

/// The name of the cluster resource, as Kafka spells it.
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";
/// A literal resource name, principal or host that stands for every one.
pub const WILDCARD: &str = "*";
/// The principal of a client that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";
/// The principal of a binding for every user.
pub const ANY_USER: &str = "User:*";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    /// A schema registry subject (Floe's, as Confluent's registry authorizes them; Kafka's
    /// protocol has no code for it, so these are managed over HTTP only). Added last: a
    /// binding's type is stored by its place here.
    Subject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclPatternType {
    Literal,
    Prefixed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclOperation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

impl AclOperation {
    /// Whether a binding for `self` also covers a request for `asked`.
    fn implies(self, asked: Self) -> bool {
        use AclOperation::*;
        self == All
            || self == asked
            || (asked == Describe && matches!(self, Read | Write | Delete | Alter))
            || (asked == DescribeConfigs && self == AlterConfigs)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclPermission {
    Deny,
    Allow,
}

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: AclResourceType,
    pub resource_name: String,
    pub pattern_type: AclPatternType,
    /// `Type:name`, such as `User:alice`; `User:*` is every user.
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

impl AclBinding {
    /// Why Kafka would refuse to create this binding, if it would.
    /// A binding format 8 allows and earlier formats refused: DescribeConfigs or AlterConfigs
    /// on a group.
    pub fn is_group_config_acl(&self) -> bool {
        self.resource_type == AclResourceType::Group
            && matches!(self.operation, AclOperation::DescribeConfigs | AclOperation::AlterConfigs)
    }

    pub fn invalid(&self) -> Option<String> {
        let principal_type = self.principal.split_once(':').map(|(t, n)| (t, n.is_empty()));
        if self.resource_name.is_empty() || self.resource_name.len() > ACL_RESOURCE_NAME_BYTES_MAX {
            return Some(format!("a resource name has 1 to {ACL_RESOURCE_NAME_BYTES_MAX} bytes"));
        }
        if self.resource_type == AclResourceType::Cluster && self.resource_name != CLUSTER_RESOURCE_NAME {
            return Some(format!("the cluster resource is named {CLUSTER_RESOURCE_NAME:?}"));
        }
        if self.pattern_type == AclPatternType::Prefixed && self.resource_name == WILDCARD {
            return Some("a prefixed pattern cannot be \"*\"; use a literal \"*\"".into());
        }
        if self.principal.len() > ACL_PRINCIPAL_BYTES_MAX
            || !matches!(principal_type, Some((t, false)) if !t.is_empty())
        {
            return Some(format!(
                "a principal is TYPE:NAME, such as User:alice, up to {ACL_PRINCIPAL_BYTES_MAX} bytes"
            ));
        }
        if self.host.is_empty() || self.host.len() > ACL_HOST_BYTES_MAX {
            return Some(format!("a host is an IP address or \"*\", up to {ACL_HOST_BYTES_MAX} bytes"));
        }
        let valid_op = match self.resource_type {
            AclResourceType::Topic => {
                !matches!(self.operation, AclOperation::ClusterAction | AclOperation::IdempotentWrite)
            }
            AclResourceType::Group => {
                // DescribeConfigs and AlterConfigs: the group's configs (format 8).
                matches!(
                    self.operation,
                    AclOperation::All
                        | AclOperation::Read
                        | AclOperation::Describe
                        | AclOperation::Delete
                        | AclOperation::DescribeConfigs
                        | AclOperation::AlterConfigs
                )
            }
            AclResourceType::Cluster => {
                !matches!(self.operation, AclOperation::Read | AclOperation::Write | AclOperation::Delete)
            }
            AclResourceType::TransactionalId => {
                matches!(self.operation, AclOperation::All | AclOperation::Describe | AclOperation::Write)
            }
            // Read: schemas and versions; Write: register; Delete; DescribeConfigs and
            // AlterConfigs: the subject's compatibility level and mode.
            AclResourceType::Subject => matches!(
                self.operation,
                AclOperation::All
                    | AclOperation::Read
                    | AclOperation::Write
                    | AclOperation::Delete
                    | AclOperation::Describe
                    | AclOperation::DescribeConfigs
                    | AclOperation::AlterConfigs
            ),
        };
        (!valid_op).then(|| format!("{:?} does not apply to a {:?} resource", self.operation, self.resource_type))
    }

    /// Whether this binding's pattern covers the resource `name` of type `resource_type`.
    fn covers(&self, resource_type: AclResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                AclPatternType::Literal => self.resource_name == name || self.resource_name == WILDCARD,
                AclPatternType::Prefixed => name.starts_with(self.resource_name.as_str()),
            }
    }

    fn applies_to(&self, principal: &str, host: &str) -> bool {
        let any_user = self.principal == ANY_USER && principal.starts_with("User:");
        (self.principal == principal || any_user) && (self.host == WILDCARD || self.host == host)
    }
}

/// Which patterns a filter selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    /// Any pattern; a name filter then compares names as written.
    Any,
    /// The patterns that cover the filter's resource name (literal, wildcard or prefix).
    Match,
    Exactly(AclPatternType),
}

/// Selects bindings, for DescribeAcls and DeleteAcls; `None` matches anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<AclResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<AclPermission>,
}

impl AclFilter {
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let is = |filter: &Option<String>, value: &str| filter.as_deref().is_none_or(|f| f == value);
        let name = match (&self.pattern, &self.resource_name) {
            (PatternFilter::Match, Some(name)) => match binding.pattern_type {
                AclPatternType::Literal => binding.resource_name == *name || binding.resource_name == WILDCARD,
                AclPatternType::Prefixed => name.starts_with(binding.resource_name.as_str()),
            },
            (PatternFilter::Exactly(p), name) => binding.pattern_type == *p && is(name, &binding.resource_name),
            (_, name) => is(name, &binding.resource_name),
        };
        name && self.resource_type.is_none_or(|t| t == binding.resource_type)
            && is(&self.principal, &binding.principal)
            && is(&self.host, &binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }
}

/// Whether `principal` from `host` may do `operation` on the resource `name` of type
/// `resource_type`, given a tenant's `bindings`. `allow_if_no_acl`: Kafka's
/// `allow.everyone.if.no.acl.found`.
pub fn allows<'a>(
    bindings: impl Iterator<Item = &'a AclBinding> + Clone,
    principal: &str,
    host: &str,
    operation: AclOperation,
    resource_type: AclResourceType,
    name: &str,
    allow_if_no_acl: bool,
) -> bool {
    let covering = bindings.filter(|b| b.covers(resource_type, name));
    let mut any = false;
    let mut allowed = false;
    for binding in covering {
        any = true;
        if !binding.applies_to(principal, host) {
            continue;
        }
        match binding.permission {
            // A deny names its operation exactly (or All): denying Read does not deny Describe.
            AclPermission::Deny if binding.operation == AclOperation::All || binding.operation == operation => {
                return false;
            }
            AclPermission::Deny => {}
            AclPermission::Allow => allowed |= binding.operation.implies(operation),
        }
    }
    allowed || (!any && allow_if_no_acl)
}

/// Whether some binding allows `principal` from `host` to do `operation` on some resource of
/// `resource_type` and no wildcard binding denies it everywhere: Kafka's test for idempotent
/// producers, which need Write on any topic.
pub fn allows_some<'a>(
    bindings: impl Iterator<Item = &'a AclBinding> + Clone,
    principal: &str,
    host: &str,
    operation: AclOperation,
    resource_type: AclResourceType,
) -> bool {
    let applying = bindings.filter(|b| b.resource_type == resource_type && b.applies_to(principal, host));
    let denied_everywhere = applying.clone().any(|b| {
        b.permission == AclPermission::Deny
            && b.pattern_type == AclPatternType::Literal
            && b.resource_name == WILDCARD
            && (b.operation == AclOperation::All || b.operation == operation)
    });
    !denied_everywhere
        && applying.into_iter().any(|b| b.permission == AclPermission::Allow && b.operation.implies(operation))
}

#[cfg(test)]
mod tests {
    use super::AclOperation::*;
    use super::AclPermission::*;
    use super::AclResourceType::*;
    use super::*;

    fn binding(
        pattern: AclPatternType,
        name: &str,
        principal: &str,
        operation: AclOperation,
        permission: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type: Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission,
        }
    }

    #[test]
    fn a_deny_wins_and_describe_follows_from_read_or_write() {
        let acls = [
            binding(AclPatternType::Prefixed, "orders-", "User:alice", Read, Allow),
            binding(AclPatternType::Literal, "orders-secret", "User:alice", Read, Deny),
            binding(AclPatternType::Literal, "*", "User:*", Write, Allow),
        ];
        let may = |user: &str, op, name: &str| allows(acls.iter(), user, "10.0.0.1", op, Topic, name, false);
        assert!(may("User:alice", Read, "orders-eu"));
        assert!(may("User:alice", Describe, "orders-eu"), "Read implies Describe");
        assert!(!may("User:alice", Read, "orders-secret"), "a deny wins over an allow");
        assert!(may("User:alice", Describe, "orders-secret"), "denying Read leaves Describe");
        assert!(may("User:bob", Write, "anything"), "User:* with a literal * allows every user everywhere");
        assert!(!may("User:bob", Read, "orders-eu"));
        assert!(!may("User:alice", Delete, "orders-eu"));
        assert!(!allows(acls.iter(), "User:alice", "h", Read, Group, "g", false), "topics only");
    }

    #[test]
    fn no_acl_for_a_resource_is_a_deny_unless_the_operator_allows_it() {
        let acls = [binding(AclPatternType::Literal, "orders", "User:alice", Read, Allow)];
        assert!(!allows(acls.iter(), "User:bob", "h", Read, Topic, "payments", false));
        assert!(allows(acls.iter(), "User:bob", "h", Read, Topic, "payments", true));
        assert!(!allows(acls.iter(), "User:bob", "h", Read, Topic, "orders", true), "covered, so not open");
    }

    #[test]
    fn hosts_narrow_a_binding() {
        let mut only_one = binding(AclPatternType::Literal, "orders", "User:alice", All, Allow);
        only_one.host = "10.0.0.1".into();
        let acls = [only_one];
        assert!(allows(acls.iter(), "User:alice", "10.0.0.1", Write, Topic, "orders", false));
        assert!(!allows(acls.iter(), "User:alice", "10.0.0.2", Write, Topic, "orders", false));
    }

    #[test]
    fn idempotent_producers_need_write_on_some_topic() {
        let acls = [binding(AclPatternType::Prefixed, "logs-", "User:alice", Write, Allow)];
        assert!(allows_some(acls.iter(), "User:alice", "h", Write, Topic));
        assert!(!allows_some(acls.iter(), "User:bob", "h", Write, Topic));
        let denied = [acls[0].clone(), binding(AclPatternType::Literal, "*", "User:alice", All, Deny)];
        assert!(!allows_some(denied.iter(), "User:alice", "h", Write, Topic));
    }

    #[test]
    fn filters_select_as_describe_and_delete_acls_do() {
        let acls = [
            binding(AclPatternType::Literal, "orders", "User:alice", Read, Allow),
            binding(AclPatternType::Literal, "*", "User:bob", Read, Allow),
            binding(AclPatternType::Prefixed, "ord", "User:carol", Read, Allow),
            binding(AclPatternType::Prefixed, "pay", "User:carol", Read, Allow),
        ];
        let filter = |pattern, name: Option<&str>| AclFilter {
            resource_type: Some(Topic),
            resource_name: name.map(str::to_owned),
            pattern,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        };
        let count = |f: AclFilter| acls.iter().filter(|b| f.matches(b)).count();
        assert_eq!(count(filter(PatternFilter::Match, Some("orders"))), 3, "literal, wildcard and prefix");
        assert_eq!(count(filter(PatternFilter::Any, Some("orders"))), 1, "names as written");
        assert_eq!(count(filter(PatternFilter::Exactly(AclPatternType::Prefixed), None)), 2);
        assert_eq!(count(filter(PatternFilter::Any, None)), 4);
    }

    #[test]
    fn kafka_refuses_the_same_bindings() {
        let mut b = binding(AclPatternType::Literal, "orders", "alice", Read, Allow);
        assert!(b.invalid().is_some(), "a principal needs its type");
        b.principal = "User:alice".into();
        assert_eq!(b.invalid(), None);
        b.resource_type = Group;
        b.operation = Write;
        assert!(b.invalid().is_some(), "groups are not written");
        b.resource_type = Cluster;
        b.operation = Alter;
        assert!(b.invalid().is_some(), "the cluster is kafka-cluster");
        b.resource_name = CLUSTER_RESOURCE_NAME.into();
        assert_eq!(b.invalid(), None);
    }
}
