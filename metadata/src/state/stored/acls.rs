//! How today's format stores ACL bindings. Each type is the in-memory type of the same name in
//! [`crate::acl`], field for field in the order encoded; commands carry these layouts too. The
//! conversions below name every field, so a change to the in-memory type compiles only once they
//! say how it is stored. A change to a type here is a format change: a new format version, a mirror
//! of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

use crate::acl::{AclOperation, AclPatternType, AclPermission, AclResourceType};

/// [`crate::acl::AclBinding`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: AclResourceType,
    pub resource_name: String,
    pub pattern_type: AclPatternType,
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

stored_layout!(AclBinding <=> crate::acl::AclBinding { resource_type, resource_name, pattern_type, principal, host, operation, permission });
