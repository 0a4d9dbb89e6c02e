//! How today's format stores tenants and users; their quotas and credentials are command values,
//! stored as commands carry them. Each type is the in-memory type of the same name in
//! [`crate::state`], field for field in the order encoded; the conversions below name every field,
//! so a change to the in-memory type compiles only once they say how it is stored. A change to a
//! type here is a format change: a new format version, a mirror of the old layout and a golden
//! file.

use serde::{Deserialize, Serialize};

use crate::state::{ScramCredential, ScramMechanism, TenantQuotas};

/// [`crate::state::TenantRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TenantRecord {
    pub(crate) created_ms: i64,
    pub(crate) quotas: TenantQuotas,
    pub(crate) cors_origins: Vec<String>,
    pub(crate) id: u64,
    pub(crate) producer_ids: u64,
}

impl From<crate::state::TenantRecord> for TenantRecord {
    fn from(tenant_record: crate::state::TenantRecord) -> Self {
        let crate::state::TenantRecord { created_ms, quotas, cors_origins, id, producer_ids } = tenant_record;
        Self { created_ms, quotas, cors_origins, id, producer_ids }
    }
}

impl From<TenantRecord> for crate::state::TenantRecord {
    fn from(tenant_record: TenantRecord) -> Self {
        let TenantRecord { created_ms, quotas, cors_origins, id, producer_ids } = tenant_record;
        Self { created_ms, quotas, cors_origins, id, producer_ids }
    }
}

/// [`crate::state::UserRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UserRecord {
    pub(crate) tenant: String,
    pub(crate) scram: std::collections::BTreeMap<ScramMechanism, ScramCredential>,
}

impl From<crate::state::UserRecord> for UserRecord {
    fn from(user_record: crate::state::UserRecord) -> Self {
        let crate::state::UserRecord { tenant, scram } = user_record;
        Self { tenant, scram }
    }
}

impl From<UserRecord> for crate::state::UserRecord {
    fn from(user_record: UserRecord) -> Self {
        let UserRecord { tenant, scram } = user_record;
        Self { tenant, scram }
    }
}
