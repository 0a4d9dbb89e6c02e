//! Tenants and their credentials: users with SCRAM credentials (which also check SASL/PLAIN
//! passwords) and HTTP API keys. Only derived secrets are stored: the proposer salts and hashes,
//! so neither the log nor a snapshot holds a password or an API key.

use serde::{Deserialize, Serialize};

use super::State;
use crate::command::{CommandError, Outcome};
use crate::limits::{
    API_KEY_COUNT_MAX, CREDENTIAL_NAME_BYTES_MAX, ORIGIN_BYTES_MAX, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
    TENANT_CORS_ORIGINS_MAX, TENANT_COUNT_MAX, USER_COUNT_MAX,
};

/// A tenant: a namespace of users, API keys, topics, groups and transactional ids
/// (`crate::namespace`), with its quotas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantRecord {
    pub created_ms: i64,
    pub quotas: TenantQuotas,
    /// Origins browsers may call the HTTP API from with this tenant's API keys (CORS), besides
    /// the agents' own `--http-cors-origin`s; `*` is any.
    pub cors_origins: Vec<String>,
    /// Never reused (from [`State::last_tenant_id`]); 0 for tenants created before format 2.
    /// Part of the namespace key, so a tenant created again under this name starts in another
    /// namespace.
    pub id: u64,
    /// Producer ids bound to this tenant: kept with the producers table, so the tenant's share
    /// of it is checked without a scan.
    pub producer_ids: u64,
}

impl TenantRecord {
    /// This tenant's namespace; `name` is the tenant's name.
    pub fn namespace(&self, name: &str) -> crate::namespace::Namespace {
        crate::namespace::Namespace::of(&crate::namespace::namespace_key(name, self.id))
    }
}

/// Rate quotas of one HTTP API key, within its tenant's: a provider with a fleet of devices under
/// one tenant holds each device's key to its own share. `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApiKeyQuotas {
    pub produce_bytes_per_sec: Option<u64>,
    pub fetch_bytes_per_sec: Option<u64>,
    pub requests_per_sec: Option<u64>,
}

/// What one tenant may use across the cluster; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantQuotas {
    /// Bytes of produce requests per second (Kafka's `producer_byte_rate`), over both listeners.
    pub produce_bytes_per_sec: Option<u64>,
    /// Bytes of fetch responses per second (Kafka's `consumer_byte_rate`).
    pub fetch_bytes_per_sec: Option<u64>,
    /// Partitions of all the tenant's topics together.
    pub partitions: Option<u32>,
    /// Requests per second over both listeners (Kafka's request quota, counted in requests
    /// rather than thread time).
    pub requests_per_sec: Option<u64>,
    /// Bytes stored in all the tenant's partitions together; produce is refused at or past it
    /// until retention or deletion frees space.
    pub storage_bytes: Option<u64>,
    /// The tenant's share of the cluster-wide tables (topics, consumer groups, transactional
    /// ids, producer ids, ACL bindings), so one tenant filling its share never refuses
    /// another. Unlike the quotas above, `None` here is the default of [`TenantTable::default_limit`].
    pub topics: Option<u64>,
    pub groups: Option<u64>,
    pub transactional_ids: Option<u64>,
    pub producer_ids: Option<u64>,
    pub acls: Option<u64>,
}

/// A cluster-wide table each tenant may fill only up to its share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantTable {
    Topics,
    Groups,
    TransactionalIds,
    ProducerIds,
    Acls,
    /// Schema registry subjects and schemas (format 3; not settable per tenant yet).
    Subjects,
    Schemas,
    /// Groups with configs set (format 8): as many as the tenant may have groups.
    GroupConfigs,
    /// Share partitions of the tenant's share groups (not settable per tenant yet).
    SharePartitions,
}

impl TenantTable {
    /// A tenant's share when its quotas name none: a tenth (or, for ACLs, a hundredth) of the
    /// cluster's table, so ten tenants at their default cannot fill it.
    pub fn default_limit(self) -> u64 {
        use crate::limits::{
            ACL_COUNT_MAX, GROUP_COUNT_MAX, PRODUCER_COUNT_MAX, TOPIC_COUNT_MAX, TRANSACTION_COUNT_MAX,
        };
        let tenth = |n: usize| (n / 10) as u64;
        match self {
            Self::Topics => tenth(TOPIC_COUNT_MAX),
            Self::Groups => tenth(GROUP_COUNT_MAX),
            Self::TransactionalIds => tenth(TRANSACTION_COUNT_MAX),
            Self::ProducerIds => tenth(PRODUCER_COUNT_MAX),
            Self::Acls => (ACL_COUNT_MAX / 100) as u64,
            Self::Subjects => tenth(crate::limits::REGISTRY_SUBJECT_COUNT_MAX),
            Self::Schemas => tenth(crate::limits::REGISTRY_SCHEMA_COUNT_MAX),
            Self::GroupConfigs => tenth(GROUP_COUNT_MAX),
            Self::SharePartitions => tenth(super::share::SHARE_PARTITIONS_MAX),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Topics => "topics",
            Self::Groups => "consumer groups",
            Self::TransactionalIds => "transactional ids",
            Self::ProducerIds => "producer ids",
            Self::Acls => "ACL bindings",
            Self::Subjects => "schema subjects",
            Self::Schemas => "schemas",
            Self::GroupConfigs => "groups with configs",
            Self::SharePartitions => "share partitions",
        }
    }
}

impl TenantQuotas {
    /// How many entries of `table` the tenant may hold.
    pub fn table_limit(&self, table: TenantTable) -> u64 {
        let set = match table {
            TenantTable::Topics => self.topics,
            TenantTable::Groups | TenantTable::GroupConfigs => self.groups,
            TenantTable::TransactionalIds => self.transactional_ids,
            TenantTable::ProducerIds => self.producer_ids,
            TenantTable::Acls => self.acls,
            TenantTable::Subjects | TenantTable::Schemas | TenantTable::SharePartitions => None,
        };
        set.unwrap_or_else(|| table.default_limit())
    }
}

/// The SCRAM mechanisms Floe accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(Self::Sha256),
            "SCRAM-SHA-512" => Some(Self::Sha512),
            _ => None,
        }
    }

    /// Bytes of the mechanism's hash.
    pub fn hash_bytes(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// What RFC 5802 lets a server keep of a password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// A user (a SASL principal) of one tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRecord {
    pub tenant: String,
    pub scram: std::collections::BTreeMap<ScramMechanism, ScramCredential>,
}

/// An HTTP API key: its holder and the SHA-256 of its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub tenant: String,
    /// The user the key acts as.
    pub user: String,
    pub secret_sha256: Vec<u8>,
    pub created_ms: i64,
    /// The key stops working at this time; never when `None`.
    pub expires_ms: Option<i64>,
}

/// An origin as browsers send it: a scheme, a host and maybe a port, nothing else.
fn valid_origin(origin: &str) -> bool {
    let rest = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
    origin == "*"
        || origin.len() <= ORIGIN_BYTES_MAX
            && rest.is_some_and(|host| {
                !host.is_empty()
                    && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
            })
}

pub(super) fn check_name(what: &str, name: &str) -> Result<(), CommandError> {
    let valid = !name.is_empty()
        && name.len() <= CREDENTIAL_NAME_BYTES_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if valid {
        Ok(())
    } else {
        Err(CommandError::InvalidCredential(format!(
            "{what} {name:?}: 1 to {CREDENTIAL_NAME_BYTES_MAX} of a-z, A-Z, 0-9, '.', '_', '-', '@'"
        )))
    }
}

impl State {
    pub(super) fn create_tenant(&mut self, name: String, now_ms: i64) -> Result<Outcome, CommandError> {
        check_name("tenant", &name)?;
        if self.tenants.contains_key(&name) {
            return Err(CommandError::InvalidCredential(format!("tenant {name:?} exists")));
        }
        if self.tenants.len() >= TENANT_COUNT_MAX {
            return Err(CommandError::LimitReached(format!("at most {TENANT_COUNT_MAX} tenants")));
        }
        self.last_tenant_id += 1;
        let id = self.last_tenant_id;
        self.tenants.insert(name, TenantRecord { created_ms: now_ms, id, ..TenantRecord::default() });
        Ok(Outcome::Done)
    }

    /// The namespace of tenant `name`, if the cluster has it.
    pub fn tenant_namespace(&self, name: &str) -> Option<crate::namespace::Namespace> {
        self.tenants.get(name).map(|t| t.namespace(name))
    }

    /// The tenant whose namespace key is `key`: `None` for a key of a deleted tenant, even when
    /// a tenant of the same name exists now.
    pub fn tenant_of_key<'a>(&self, key: &'a str) -> Option<(&'a str, &TenantRecord)> {
        let (name, id) = crate::namespace::parse_key(key)?;
        self.tenants.get(name).filter(|t| t.id == id).map(|t| (name, t))
    }

    /// The tenant owning the stored topic name `stored`, if the cluster has it.
    fn topic_tenant<'a>(&self, stored: &'a str) -> Option<(&'a str, &TenantRecord)> {
        self.tenant_of_key(crate::namespace::key_of(stored)?)
    }

    pub(super) fn set_api_key_quotas(&mut self, key_id: &str, quotas: ApiKeyQuotas) -> Result<Outcome, CommandError> {
        if [quotas.produce_bytes_per_sec, quotas.fetch_bytes_per_sec, quotas.requests_per_sec].contains(&Some(0)) {
            return Err(CommandError::InvalidCredential("a rate quota is at least 1 per second".into()));
        }
        if !self.api_keys.contains_key(key_id) {
            return Err(CommandError::CredentialNotFound(format!("API key {key_id:?}")));
        }
        if quotas == ApiKeyQuotas::default() {
            self.api_key_quotas.remove(key_id);
        } else {
            self.api_key_quotas.insert(key_id.to_owned(), quotas);
        }
        Ok(Outcome::Done)
    }

    pub(super) fn set_tenant_quotas(&mut self, name: &str, quotas: TenantQuotas) -> Result<Outcome, CommandError> {
        if quotas.produce_bytes_per_sec == Some(0)
            || quotas.fetch_bytes_per_sec == Some(0)
            || quotas.requests_per_sec == Some(0)
        {
            return Err(CommandError::InvalidCredential("a rate quota is at least 1 per second".into()));
        }
        let tenant =
            self.tenants.get_mut(name).ok_or_else(|| CommandError::CredentialNotFound(format!("tenant {name:?}")))?;
        tenant.quotas = quotas;
        Ok(Outcome::Done)
    }

    pub(super) fn set_tenant_cors_origins(
        &mut self,
        name: &str,
        origins: Vec<String>,
    ) -> Result<Outcome, CommandError> {
        if origins.len() > TENANT_CORS_ORIGINS_MAX {
            return Err(CommandError::InvalidCredential(format!("at most {TENANT_CORS_ORIGINS_MAX} origins")));
        }
        if let Some(bad) = origins.iter().find(|o| !valid_origin(o)) {
            return Err(CommandError::InvalidCredential(format!(
                "origin {bad:?}: \"*\" or http(s)://host[:port], up to {ORIGIN_BYTES_MAX} bytes"
            )));
        }
        let tenant =
            self.tenants.get_mut(name).ok_or_else(|| CommandError::CredentialNotFound(format!("tenant {name:?}")))?;
        tenant.cors_origins = origins;
        Ok(Outcome::Done)
    }

    /// Refuses `added` more partitions for the tenant owning topic `stored_name`, if that takes
    /// the tenant past its partition quota.
    /// The tenant a stored topic name, group id or transactional id belongs to, if the cluster
    /// has that tenant.
    pub(super) fn owning_tenant<'a>(&self, stored: &'a str) -> Option<&'a str> {
        let (key, _) = stored.split_once(crate::namespace::SEPARATOR)?;
        self.tenant_of_key(key).map(|(name, _)| name)
    }

    /// Refuses one more entry of `table` for `tenant` if it holds its share already.
    pub(super) fn check_table_quota(&self, tenant: &str, table: TenantTable) -> Result<(), CommandError> {
        let Some(record) = self.tenants.get(tenant) else { return Ok(()) };
        let max = record.quotas.table_limit(table);
        let ns = record.namespace(tenant);
        let prefix = ns.prefix();
        let in_namespace = |name: &String| ns.owns(name);
        let used = match table {
            TenantTable::Topics => {
                self.topic_ids.range(prefix.to_owned()..).take_while(|(n, _)| in_namespace(n)).count()
            }
            TenantTable::Groups => self.groups.range(prefix.to_owned()..).take_while(|(n, _)| in_namespace(n)).count(),
            TenantTable::TransactionalIds => {
                self.transactions.range(prefix.to_owned()..).take_while(|(n, _)| in_namespace(n)).count()
            }
            TenantTable::ProducerIds => record.producer_ids as usize,
            TenantTable::Acls => self.acls.get(tenant).map_or(0, |b| b.len()),
            TenantTable::Subjects => self.registries.get(ns.key()).map_or(0, |r| r.subjects.len()),
            TenantTable::Schemas => self.registries.get(ns.key()).map_or(0, |r| r.schemas.len()),
            TenantTable::GroupConfigs => {
                self.group_configs.range(prefix.to_owned()..).take_while(|(n, _)| in_namespace(n)).count()
            }
            TenantTable::SharePartitions => self.share_partitions_in(&ns).count(),
        } as u64;
        if used >= max {
            return Err(CommandError::QuotaExceeded(format!(
                "tenant {tenant:?} may have {max} {}; it has {used}",
                table.name()
            )));
        }
        Ok(())
    }

    pub(super) fn check_partition_quota(&self, stored_name: &str, added: usize) -> Result<(), CommandError> {
        let Some((tenant, record)) = self.topic_tenant(stored_name) else { return Ok(()) };
        let Some(max) = record.quotas.partitions else { return Ok(()) };
        let ns = record.namespace(tenant);
        let used: usize = self.topics.values().filter(|t| ns.owns(&t.name)).map(|t| t.partitions.len()).sum();
        if used + added > max as usize {
            return Err(CommandError::QuotaExceeded(format!(
                "tenant {tenant:?} may have {max} partitions; it has {used} and asked for {added} more"
            )));
        }
        Ok(())
    }

    /// Bytes stored in the partitions of `tenant`'s topics.
    pub fn tenant_stored_bytes(&self, tenant: &str) -> u64 {
        let Some(ns) = self.tenant_namespace(tenant) else { return 0 };
        let prefix = ns.prefix();
        let topics = self.topic_ids.range(prefix.to_owned()..).take_while(|(name, _)| ns.owns(name));
        let partitions = topics.filter_map(|(_, id)| self.topics.get(id)).flat_map(|t| &t.partitions);
        partitions.map(|p| p.index_bytes).sum()
    }

    /// Why the tenant owning topic `stored_name` may not store more, if it is at its storage
    /// quota. Checked by agents before they append, so a quota may be passed by what is in
    /// flight at that moment.
    pub fn storage_quota_exceeded(&self, stored_name: &str) -> Option<String> {
        let (tenant, record) = self.topic_tenant(stored_name)?;
        let max = record.quotas.storage_bytes?;
        let used = self.tenant_stored_bytes(tenant);
        (used >= max).then(|| format!("tenant {tenant:?} stores {used} bytes of its {max}-byte storage quota"))
    }

    /// Deletes a tenant with everything in its namespace: users, API keys, ACLs, topics (their
    /// objects lose their references and are collected), groups, transactions and idempotency
    /// keys, producer ids. A tenant created again under the same name starts empty, in a
    /// namespace of its own.
    pub(super) fn delete_tenant(&mut self, name: &str) -> Result<Outcome, CommandError> {
        let Some(record) = self.tenants.remove(name) else {
            return Err(CommandError::CredentialNotFound(format!("tenant {name:?}")));
        };
        self.users.retain(|_, u| u.tenant != name);
        let api_keys = &mut self.api_keys;
        self.api_key_quotas.retain(|id, _| api_keys.get(id).is_some_and(|k| k.tenant != name));
        api_keys.retain(|_, k| k.tenant != name);
        self.acls.remove(name);
        self.changed.access();
        let ns = record.namespace(name);
        self.producers.retain(|_, p| p.tenant.as_deref() != Some(ns.key()));
        let topics: Vec<String> = self.topic_ids.keys().filter(|t| ns.owns(t)).cloned().collect();
        for topic in topics {
            self.delete_topic(&topic)?;
        }
        self.groups.retain(|g, _| !ns.owns(g));
        self.group_configs.retain(|g, _| !ns.owns(g));
        self.transactions.retain(|t, _| !ns.owns(t));
        self.idempotency_keys.retain(|k, _| !ns.owns(k));
        self.registries.remove(ns.key());
        Ok(Outcome::Done)
    }

    /// Creates a user, or replaces one mechanism's credential of an existing user of the same
    /// tenant.
    pub(super) fn upsert_scram_credential(
        &mut self,
        user: String,
        tenant: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<Outcome, CommandError> {
        check_name("user", &user)?;
        if !self.tenants.contains_key(&tenant) {
            return Err(CommandError::CredentialNotFound(format!("tenant {tenant:?}")));
        }
        let bytes = mechanism.hash_bytes();
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&credential.iterations)
            || credential.salt.is_empty()
            || credential.salt.len() > 256
            || credential.stored_key.len() != bytes
            || credential.server_key.len() != bytes
        {
            return Err(CommandError::InvalidCredential(format!(
                "a {} credential has a salt of 1 to 256 bytes, {SCRAM_ITERATIONS_MIN} to {SCRAM_ITERATIONS_MAX} iterations and {bytes}-byte keys",
                mechanism.name()
            )));
        }
        let user_count = self.users.len();
        match self.users.get_mut(&user) {
            Some(existing) if existing.tenant != tenant => {
                Err(CommandError::InvalidCredential(format!("user {user:?} belongs to tenant {:?}", existing.tenant)))
            }
            Some(existing) => {
                existing.scram.insert(mechanism, credential);
                Ok(Outcome::Done)
            }
            None if user_count >= USER_COUNT_MAX => {
                Err(CommandError::LimitReached(format!("at most {USER_COUNT_MAX} users")))
            }
            None => {
                self.users.insert(user, UserRecord { tenant, scram: [(mechanism, credential)].into() });
                Ok(Outcome::Done)
            }
        }
    }

    /// Deletes a user and the API keys that act as it.
    pub(super) fn delete_user(&mut self, user: &str) -> Result<Outcome, CommandError> {
        if self.users.remove(user).is_none() {
            return Err(CommandError::CredentialNotFound(format!("user {user:?}")));
        }
        let api_keys = &mut self.api_keys;
        self.api_key_quotas.retain(|id, _| api_keys.get(id).is_some_and(|k| k.user != user));
        api_keys.retain(|_, k| k.user != user);
        Ok(Outcome::Done)
    }

    /// Deletes one mechanism's credential of `user` of `tenant`; with its last one, the user.
    pub(super) fn delete_scram_credential(
        &mut self,
        user: &str,
        tenant: &str,
        mechanism: ScramMechanism,
    ) -> Result<Outcome, CommandError> {
        let Some(existing) = self.users.get_mut(user).filter(|u| u.tenant == tenant) else {
            return Err(CommandError::CredentialNotFound(format!("user {user:?}")));
        };
        if existing.scram.remove(&mechanism).is_none() {
            return Err(CommandError::CredentialNotFound(format!("{} credential of user {user:?}", mechanism.name())));
        }
        if existing.scram.is_empty() {
            return self.delete_user(user);
        }
        Ok(Outcome::Done)
    }

    pub(super) fn create_api_key(&mut self, key_id: String, record: ApiKeyRecord) -> Result<Outcome, CommandError> {
        check_name("API key id", &key_id)?;
        if record.secret_sha256.len() != 32 {
            return Err(CommandError::InvalidCredential("an API key's secret hash is 32 bytes".into()));
        }
        match self.users.get(&record.user) {
            Some(u) if u.tenant == record.tenant => {}
            _ => {
                return Err(CommandError::CredentialNotFound(format!(
                    "user {:?} of tenant {:?}",
                    record.user, record.tenant
                )));
            }
        }
        if self.api_keys.contains_key(&key_id) {
            return Err(CommandError::InvalidCredential(format!("API key {key_id:?} exists")));
        }
        if self.api_keys.len() >= API_KEY_COUNT_MAX {
            return Err(CommandError::LimitReached(format!("at most {API_KEY_COUNT_MAX} API keys")));
        }
        self.api_keys.insert(key_id, record);
        Ok(Outcome::Done)
    }

    pub(super) fn delete_api_key(&mut self, key_id: &str) -> Result<Outcome, CommandError> {
        self.api_key_quotas.remove(key_id);
        self.api_keys
            .remove(key_id)
            .map(|_| Outcome::Done)
            .ok_or_else(|| CommandError::CredentialNotFound(format!("API key {key_id:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn credential(bytes: usize) -> ScramCredential {
        ScramCredential { salt: vec![1; 16], iterations: 4096, stored_key: vec![2; bytes], server_key: vec![3; bytes] }
    }

    fn user(name: &str, tenant: &str, mechanism: ScramMechanism) -> Command {
        Command::UpsertScramCredential {
            user: name.into(),
            tenant: tenant.into(),
            mechanism,
            credential: credential(mechanism.hash_bytes()).into(),
        }
    }

    fn key(id: &str, tenant: &str, user: &str) -> Command {
        Command::CreateApiKey {
            key_id: id.into(),
            record: ApiKeyRecord {
                tenant: tenant.into(),
                user: user.into(),
                secret_sha256: vec![9; 32],
                created_ms: 0,
                expires_ms: None,
            }
            .into(),
        }
    }

    #[test]
    fn cors_origins_are_origins() {
        for good in ["*", "https://app.acme.test", "http://localhost:3000", "https://[::1]:8443"] {
            assert!(valid_origin(good), "{good}");
        }
        for bad in ["", "app.acme.test", "https://", "https://a.test/path", "https://a.test, https://b.test"] {
            assert!(!valid_origin(bad), "{bad}");
        }
    }

    #[test]
    fn users_and_keys_belong_to_one_tenant_and_go_with_it() {
        let mut state = State::default();
        let commands = [
            Command::CreateTenant { name: "acme".into(), now_ms: 1 },
            Command::CreateTenant { name: "globex".into(), now_ms: 1 },
            user("alice", "acme", ScramMechanism::Sha256),
            user("alice", "acme", ScramMechanism::Sha512),
            user("bob", "globex", ScramMechanism::Sha256),
            key("k1", "acme", "alice"),
            key("k2", "globex", "bob"),
        ];
        for (i, c) in commands.into_iter().enumerate() {
            assert_eq!(state.apply(i as u64 + 1, c), Ok(Outcome::Done));
        }
        assert_eq!(state.users["alice"].scram.len(), 2);
        // A user name is one principal cluster-wide; a key acts only as a user of its tenant.
        assert!(state.apply(10, user("alice", "globex", ScramMechanism::Sha256)).is_err());
        assert!(state.apply(11, key("k3", "globex", "alice")).is_err());
        assert!(state.apply(12, key("k1", "acme", "alice")).is_err(), "key ids are unique");
        assert!(state.apply(13, Command::CreateTenant { name: "acme".into(), now_ms: 2 }).is_err());
        assert!(state.apply(14, Command::CreateTenant { name: "no spaces".into(), now_ms: 2 }).is_err());
        let mut short = credential(31);
        short.iterations = 4096;
        let bad = Command::UpsertScramCredential {
            user: "carol".into(),
            tenant: "acme".into(),
            mechanism: ScramMechanism::Sha256,
            credential: short.into(),
        };
        assert!(state.apply(15, bad).is_err());
        for (i, topic) in ["acme#1~orders", "globex#2~orders"].into_iter().enumerate() {
            let create = Command::CreateTopic {
                name: topic.into(),
                topic_id: uuid::Uuid::from_u128(i as u128 + 1),
                partition_count: 1,
                configs: Default::default(),
            };
            assert!(matches!(state.apply(20 + i as u64, create), Ok(Outcome::TopicCreated { .. })));
        }
        assert_eq!(state.apply(22, Command::DeleteTenant { name: "acme".into() }), Ok(Outcome::Done));
        assert!(!state.users.contains_key("alice") && !state.api_keys.contains_key("k1"));
        let topics: Vec<&String> = state.topic_ids.keys().collect();
        assert_eq!(topics, vec!["globex#2~orders"], "the tenant's topics go with it, no one else's");
        assert!(state.users.contains_key("bob") && state.api_keys.contains_key("k2"));
        assert_eq!(state.apply(23, Command::DeleteUser { user: "bob".into() }), Ok(Outcome::Done));
        assert!(state.api_keys.is_empty(), "a deleted user's keys go with it");
        assert!(state.apply(24, Command::DeleteApiKey { key_id: "k2".into() }).is_err());
    }

    #[test]
    fn a_tenant_created_again_gets_a_namespace_of_its_own() {
        let mut state = State::default();
        let topic = |name: &str, id: u128| Command::CreateTopic {
            name: name.into(),
            topic_id: uuid::Uuid::from_u128(id),
            partition_count: 1,
            configs: Default::default(),
        };
        let init = |key: &str| Command::InitProducerId {
            transactional_id: None,
            transaction_timeout_ms: 10_000,
            expected: None,
            now_ms: 0,
            tenant: Some(key.into()),
        };
        let commands = [
            Command::CreateTenant { name: "acme".into(), now_ms: 1 },
            user("alice", "acme", ScramMechanism::Sha256),
            key("k1", "acme", "alice"),
            Command::SetApiKeyQuotas {
                key_id: "k1".into(),
                quotas: ApiKeyQuotas { requests_per_sec: Some(5), ..Default::default() }.into(),
            },
            topic("acme#1~orders", 1),
            init("acme#1"),
            init("acme#1"),
        ];
        for (i, c) in commands.into_iter().enumerate() {
            assert!(state.apply(i as u64 + 1, c).is_ok());
        }
        assert_eq!(state.tenants["acme"].producer_ids, 2);
        assert_eq!(state.api_key_quotas["k1"].requests_per_sec, Some(5));
        assert_eq!(state.apply(10, Command::DeleteTenant { name: "acme".into() }), Ok(Outcome::Done));
        assert!(state.producers.is_empty() && state.api_key_quotas.is_empty(), "its producers and key quotas go");
        assert_eq!(state.apply(11, Command::CreateTenant { name: "acme".into(), now_ms: 2 }), Ok(Outcome::Done));
        assert_eq!(state.tenants["acme"].id, 2, "ids are never reused");
        assert_eq!(state.tenant_namespace("acme").map(|ns| ns.key().to_owned()), Some("acme#2".into()));
        // What a session of the deleted tenant might still send lands nowhere.
        assert!(matches!(state.apply(12, topic("acme#1~orders", 2)), Err(CommandError::InvalidTopicName { .. })));
        assert!(matches!(state.apply(13, init("acme#1")), Err(CommandError::CredentialNotFound(_))));
        assert!(state.tenant_of_key("acme#1").is_none() && state.tenant_of_key("acme").is_none());
        assert!(matches!(state.apply(14, topic("acme#2~orders", 3)), Ok(Outcome::TopicCreated { .. })));
        assert!(state.apply(15, init("acme#2")).is_ok());
        assert_eq!(state.tenants["acme"].producer_ids, 1, "the new tenant starts its count again");
        let zero = ApiKeyQuotas { fetch_bytes_per_sec: Some(0), ..Default::default() };
        assert!(state.apply(16, Command::SetApiKeyQuotas { key_id: "k1".into(), quotas: zero.into() }).is_err());
        crate::state::tests::check_invariants(&state);
    }
}
