//! `floe admin tenants`: tenants, their SASL users and HTTP API keys, through the metadata
//! service (the same commands as the operator HTTP API, `floe_gateway::tenants`).

use anyhow::{Context, anyhow, bail};
use floe_gateway::tenants;
use floe_metadata::{Command, RemoteMetadata, TenantQuotas};

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
            let listing = tenants::tenants_json(&metadata.read());
            println!("{}", serde_json::to_string_pretty(&listing)?);
        }
        TenantsAction::Create { name } => {
            propose(Command::CreateTenant { name: name.clone(), now_ms }).await?;
            println!("tenant {name} created");
        }
        TenantsAction::Delete { name } => {
            propose(Command::DeleteTenant { name: name.clone() }).await?;
            println!("tenant {name} deleted with its users, API keys, ACLs, topics, groups and transactions");
        }
        TenantsAction::AddUser { tenant, user, password_stdin, mechanisms, iterations } => {
            if !password_stdin {
                bail!("give the password on stdin (--password-stdin)");
            }
            let mut password = String::new();
            std::io::stdin().read_line(&mut password).context("reading the password from stdin")?;
            let password = password.trim_end_matches(['\r', '\n']);
            for command in
                tenants::user_commands(&tenant, &user, password, &mechanisms, iterations).map_err(|e| anyhow!(e))?
            {
                propose(command).await?;
            }
            println!("user {user} of tenant {tenant}: {}", mechanisms.join(", "));
        }
        TenantsAction::DeleteUser { user } => {
            propose(Command::DeleteUser { user: user.clone() }).await?;
            println!("user {user} deleted with its API keys");
        }
        TenantsAction::CreateApiKey { tenant, user, expires_in_secs } => {
            let (key_id, token, command) =
                tenants::new_api_key(&tenant, &user, expires_in_secs, now_ms).map_err(|e| anyhow!(e))?;
            propose(command).await?;
            println!("{}", serde_json::json!({ "key_id": key_id, "token": token }));
        }
        TenantsAction::SetCors { tenant, origins } => {
            propose(Command::SetTenantCorsOrigins { tenant: tenant.clone(), origins: origins.clone() }).await?;
            println!("tenant {tenant}: CORS origins {origins:?}");
        }
        TenantsAction::SetQuotas {
            tenant,
            produce_bytes_per_sec,
            fetch_bytes_per_sec,
            partitions,
            requests_per_sec,
            storage_bytes,
            topics,
            groups,
            transactional_ids,
            producer_ids,
            acls,
        } => {
            let quotas = TenantQuotas {
                produce_bytes_per_sec,
                fetch_bytes_per_sec,
                partitions,
                requests_per_sec,
                storage_bytes,
                topics,
                groups,
                transactional_ids,
                producer_ids,
                acls,
            };
            propose(Command::SetTenantQuotas { tenant: tenant.clone(), quotas: quotas.into() }).await?;
            println!("tenant {tenant}: {quotas:?}");
        }
        TenantsAction::DeleteApiKey { key_id } => {
            propose(Command::DeleteApiKey { key_id: key_id.clone() }).await?;
            println!("API key {key_id} deleted");
        }
        TenantsAction::SetApiKeyQuotas { key_id, produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec } => {
            let quotas = floe_metadata::ApiKeyQuotas { produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec };
            propose(Command::SetApiKeyQuotas { key_id: key_id.clone(), quotas: quotas.into() }).await?;
            println!("API key {key_id}: {quotas:?}");
        }
    }
    Ok(())
}
