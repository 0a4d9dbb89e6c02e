//! `floe admin tenants`: tenants, their SASL users and HTTP API keys, through the metadata
//! service. Passwords are salted and hashed here; only the derived credential is proposed.

use anyhow::{Context, anyhow, bail};
use floe_metadata::{ApiKeyRecord, Command, RemoteMetadata, ScramMechanism};

use crate::cli::TenantsAction;

pub(crate) async fn run(addrs: Vec<String>, action: TenantsAction) -> anyhow::Result<()> {
    let metadata = RemoteMetadata::connect(addrs).await?;
    let now_ms = floe_metadata::now_ms();
    let propose = |command: Command| {
        let metadata = metadata.clone();
        async move { metadata.propose(command).await.map_err(|e| anyhow!("{e}")) }
    };
    match action {
        TenantsAction::List => {
            let state = metadata.read();
            let tenants: Vec<serde_json::Value> = state
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
                        .map(|(id, k)| serde_json::json!({ "key_id": id, "user": k.user, "expires_ms": k.expires_ms }))
                        .collect();
                    serde_json::json!({ "tenant": name, "users": users, "api_keys": keys })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&tenants)?);
        }
        TenantsAction::Create { name } => {
            propose(Command::CreateTenant { name: name.clone(), now_ms }).await?;
            println!("tenant {name} created");
        }
        TenantsAction::Delete { name } => {
            propose(Command::DeleteTenant { name: name.clone() }).await?;
            println!("tenant {name} deleted with its users and API keys");
        }
        TenantsAction::AddUser { tenant, user, password_stdin, mechanisms, iterations } => {
            if !password_stdin {
                bail!("give the password on stdin (--password-stdin)");
            }
            let mut password = String::new();
            std::io::stdin().read_line(&mut password).context("reading the password from stdin")?;
            let password = password.trim_end_matches(['\r', '\n']);
            if password.is_empty() {
                bail!("empty password");
            }
            for name in &mechanisms {
                let mechanism = ScramMechanism::from_name(name)
                    .ok_or_else(|| anyhow!("unknown mechanism {name:?}; use SCRAM-SHA-256 or SCRAM-SHA-512"))?;
                let credential =
                    floe_auth::scram::new_credential(mechanism, password, iterations).map_err(|e| anyhow!("{e}"))?;
                propose(Command::UpsertScramCredential {
                    user: user.clone(),
                    tenant: tenant.clone(),
                    mechanism,
                    credential,
                })
                .await?;
            }
            println!("user {user} of tenant {tenant}: {}", mechanisms.join(", "));
        }
        TenantsAction::DeleteUser { user } => {
            propose(Command::DeleteUser { user: user.clone() }).await?;
            println!("user {user} deleted with its API keys");
        }
        TenantsAction::CreateApiKey { tenant, user, expires_in_secs } => {
            let (key_id, token) = floe_auth::api_key::generate().map_err(|e| anyhow!("{e}"))?;
            let (_, secret) = floe_auth::api_key::split(&token).map_err(|e| anyhow!("{e}"))?;
            let record = ApiKeyRecord {
                tenant,
                user,
                secret_sha256: floe_auth::api_key::secret_hash(secret),
                created_ms: now_ms,
                expires_ms: expires_in_secs.map(|s| now_ms.saturating_add((s as i64).saturating_mul(1000))),
            };
            propose(Command::CreateApiKey { key_id: key_id.clone(), record }).await?;
            println!("{}", serde_json::json!({ "key_id": key_id, "token": token }));
        }
        TenantsAction::DeleteApiKey { key_id } => {
            propose(Command::DeleteApiKey { key_id: key_id.clone() }).await?;
            println!("API key {key_id} deleted");
        }
    }
    Ok(())
}
