//! Tenant administration shared by the operator HTTP API (`/v1/admin`) and `floe admin tenants`:
//! the listing, and the metadata commands for users and API keys. Passwords are salted and
//! hashed here, before anything is proposed: no password reaches the Raft log.

use floe_metadata::{ApiKeyRecord, Command, ScramMechanism, State, TenantTable};
use serde_json::Value;

/// PBKDF2 iterations when none are asked for (unknown users' decoys have the same).
pub use floe_auth::scram::DEFAULT_ITERATIONS;
/// Longest password accepted.
pub const PASSWORD_BYTES_MAX: usize = 1024;

/// Every tenant with its users (and their mechanisms) and API key ids; no secrets.
pub fn tenants_json(state: &State) -> Value {
    let tenants: Vec<Value> = state
        .tenants
        .keys()
        .map(|name| {
            let users: Vec<_> = state
                .users
                .iter()
                .filter(|(_, u)| &u.tenant == name)
                .map(|(user, u)| {
                    let mechanisms: Vec<_> = u.scram.keys().map(|m| m.name()).collect();
                    serde_json::json!({ "user": user, "mechanisms": mechanisms })
                })
                .collect();
            let keys: Vec<_> = state
                .api_keys
                .iter()
                .filter(|(_, k)| &k.tenant == name)
                .map(|(id, k)| {
                    let q = state.api_key_quotas.get(id).copied().unwrap_or_default();
                    let quotas = serde_json::json!({
                        "produce_bytes_per_sec": q.produce_bytes_per_sec,
                        "fetch_bytes_per_sec": q.fetch_bytes_per_sec,
                        "requests_per_sec": q.requests_per_sec,
                    });
                    serde_json::json!({ "key_id": id, "user": k.user, "expires_ms": k.expires_ms, "quotas": quotas })
                })
                .collect();
            let quotas = state.tenants.get(name).map(|t| t.quotas).unwrap_or_default();
            let quotas = serde_json::json!({
                "produce_bytes_per_sec": quotas.produce_bytes_per_sec,
                "fetch_bytes_per_sec": quotas.fetch_bytes_per_sec,
                "partitions": quotas.partitions,
                "requests_per_sec": quotas.requests_per_sec,
                "storage_bytes": quotas.storage_bytes,
                "topics": quotas.table_limit(TenantTable::Topics),
                "groups": quotas.table_limit(TenantTable::Groups),
                "transactional_ids": quotas.table_limit(TenantTable::TransactionalIds),
                "producer_ids": quotas.table_limit(TenantTable::ProducerIds),
                "acls": quotas.table_limit(TenantTable::Acls),
                "stored_bytes": state.tenant_stored_bytes(name),
            });
            let cors = state.tenants.get(name).map(|t| t.cors_origins.clone()).unwrap_or_default();
            let id = state.tenants.get(name).map_or(0, |t| t.id);
            serde_json::json!({
                "tenant": name, "id": id, "users": users, "api_keys": keys, "quotas": quotas, "cors_origins": cors
            })
        })
        .collect();
    Value::Array(tenants)
}

/// The commands that give `user` of `tenant` a SCRAM credential per mechanism named.
pub fn user_commands(
    tenant: &str,
    user: &str,
    password: &str,
    mechanisms: &[String],
    iterations: u32,
) -> Result<Vec<Command>, String> {
    if password.is_empty() || password.len() > PASSWORD_BYTES_MAX {
        return Err(format!("the password must be 1 to {PASSWORD_BYTES_MAX} bytes"));
    }
    if mechanisms.is_empty() {
        return Err("name at least one mechanism".into());
    }
    mechanisms
        .iter()
        .map(|name| {
            let mechanism = ScramMechanism::from_name(name)
                .ok_or_else(|| format!("unknown mechanism {name:?}; use SCRAM-SHA-256 or SCRAM-SHA-512"))?;
            let credential =
                floe_auth::scram::new_credential(mechanism, password, iterations).map_err(|e| e.to_string())?;
            Ok(Command::UpsertScramCredential {
                user: user.to_owned(),
                tenant: tenant.to_owned(),
                mechanism,
                credential: credential.into(),
            })
        })
        .collect()
}

/// A new API key for `user` of `tenant`: its id, the token (shown once, never stored) and the
/// command that stores its hash.
pub fn new_api_key(
    tenant: &str,
    user: &str,
    expires_in_secs: Option<u64>,
    now_ms: i64,
) -> Result<(String, String, Command), String> {
    let (key_id, token) = floe_auth::api_key::generate().map_err(|e| e.to_string())?;
    let (_, secret) = floe_auth::api_key::split(&token).map_err(|e| e.to_string())?;
    let record = ApiKeyRecord {
        tenant: tenant.to_owned(),
        user: user.to_owned(),
        secret_sha256: floe_auth::api_key::secret_hash(secret),
        created_ms: now_ms,
        expires_ms: expires_in_secs
            .map(|s| now_ms.saturating_add(i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000))),
    };
    let command = Command::CreateApiKey { key_id: key_id.clone(), record: record.into() };
    Ok((key_id, token, command))
}
