//! How today's format stores tenants, users, their SCRAM credentials, API keys and quotas. Each
//! type is the in-memory type of the same name in [`crate::state`], field for field in the order
//! encoded; commands carry these layouts too. The conversions below name every field, so a change
//! to the in-memory type compiles only once they say how it is stored. A change to a type here is a
//! format change: a new format version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

use crate::state::ScramMechanism;

/// [`crate::state::ApiKeyQuotas`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyQuotas {
    pub produce_bytes_per_sec: Option<u64>,
    pub fetch_bytes_per_sec: Option<u64>,
    pub requests_per_sec: Option<u64>,
}

stored_layout!(ApiKeyQuotas <=> crate::state::ApiKeyQuotas { produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec });

/// [`crate::state::ApiKeyRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    pub tenant: String,
    pub user: String,
    pub secret_sha256: Vec<u8>,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
}

stored_layout!(ApiKeyRecord <=> crate::state::ApiKeyRecord { tenant, user, secret_sha256, created_ms, expires_ms });

/// [`crate::state::ScramCredential`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

stored_layout!(ScramCredential <=> crate::state::ScramCredential { salt, iterations, stored_key, server_key });

/// [`crate::state::TenantQuotas`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantQuotas {
    pub produce_bytes_per_sec: Option<u64>,
    pub fetch_bytes_per_sec: Option<u64>,
    pub partitions: Option<u32>,
    pub requests_per_sec: Option<u64>,
    pub storage_bytes: Option<u64>,
    pub topics: Option<u64>,
    pub groups: Option<u64>,
    pub transactional_ids: Option<u64>,
    pub producer_ids: Option<u64>,
    pub acls: Option<u64>,
}

stored_layout!(TenantQuotas <=> crate::state::TenantQuotas { produce_bytes_per_sec, fetch_bytes_per_sec, partitions, requests_per_sec, storage_bytes, topics, groups, transactional_ids, producer_ids, acls });

/// [`crate::state::TenantRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TenantRecord {
    pub(crate) created_ms: i64,
    pub(crate) quotas: TenantQuotas,
    pub(crate) cors_origins: Vec<String>,
    pub(crate) id: u64,
    pub(crate) producer_ids: u64,
}

stored_layout!(TenantRecord <=> crate::state::TenantRecord { created_ms, quotas, cors_origins, id, producer_ids });

/// [`crate::state::UserRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UserRecord {
    pub(crate) tenant: String,
    pub(crate) scram: std::collections::BTreeMap<ScramMechanism, ScramCredential>,
}

stored_layout!(UserRecord <=> crate::state::UserRecord { tenant, scram });
