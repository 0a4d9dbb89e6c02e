//! Configs set on groups (Kafka's GROUP config resource): checked against the catalog
//! ([`crate::config::GROUP_CONFIGS`]) and the broker configs bounding them when set; the group
//! coordinator reads them through [`State::group_config_i64`] and [`State::group_config`].

use std::collections::BTreeMap;

use super::State;
use super::groups::validate_group_id;
use crate::command::{CommandError, Outcome};
use crate::config::{self, ConfigDef};
use crate::limits::GROUP_COUNT_MAX;

impl State {
    pub(super) fn set_group_configs(
        &mut self,
        group_id: String,
        configs: BTreeMap<String, String>,
    ) -> Result<Outcome, CommandError> {
        if !self.applies_format(8) {
            return Err(CommandError::InvalidConfig("group configs need every metadata node on format 8".into()));
        }
        let stored = self.check_group_configs(&group_id, &configs)?;
        if stored.is_empty() {
            self.group_configs.remove(&group_id);
            return Ok(Outcome::Done);
        }
        if !self.group_configs.contains_key(&group_id) {
            if self.group_configs.len() >= GROUP_COUNT_MAX {
                return Err(CommandError::LimitReached(format!("at most {GROUP_COUNT_MAX} groups with configs")));
            }
            if let Some(tenant) = self.owning_tenant(&group_id) {
                self.check_table_quota(tenant, super::TenantTable::GroupConfigs)?;
            }
        }
        self.group_configs.insert(group_id, stored);
        Ok(Outcome::Done)
    }

    /// Checks a group's whole set of configs: names, values, and bounds as the broker configs
    /// set them now. Returns the values normalized.
    pub fn check_group_configs(
        &self,
        group_id: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, CommandError> {
        validate_group_id(group_id)?;
        let mut checked = BTreeMap::new();
        for (name, value) in configs {
            let invalid = |e: config::ConfigError| CommandError::InvalidConfig(e.to_string());
            let normalized = config::validate_group_config(name, value).map_err(invalid)?;
            if let Some(def) = config::group_config(name) {
                self.check_group_config_bounds(def, &normalized)?;
            }
            checked.insert(name.clone(), normalized);
        }
        Ok(checked)
    }

    /// A group config with bounds must lie within the broker configs naming them.
    fn check_group_config_bounds(&self, def: &ConfigDef, value: &str) -> Result<(), CommandError> {
        if def.min_bound.is_none() && def.max_bound.is_none() {
            return Ok(());
        }
        let value: i64 = value.parse().map_err(|_| CommandError::InvalidConfig(format!("{} is a number", def.name)))?;
        if let Some((name, min)) = def.min_bound.and_then(|n| Some((n, self.broker_config_i64(n)?)))
            && value < min
        {
            return Err(CommandError::InvalidConfig(format!("{} must be at least {name} ({min})", def.name)));
        }
        if let Some((name, max)) = def.max_bound.and_then(|n| Some((n, self.broker_config_i64(n)?)))
            && value > max
        {
            return Err(CommandError::InvalidConfig(format!("{} must be at most {name} ({max})", def.name)));
        }
        Ok(())
    }

    /// The value of group config `name` for `group_id`: set on the group, else its broker
    /// config's (dynamic or default).
    pub fn group_config(&self, group_id: &str, name: &str) -> Option<&str> {
        if let Some(value) = self.group_configs.get(group_id).and_then(|c| c.get(name)) {
            return Some(value);
        }
        let broker = config::group_config(name)?.broker_synonym?;
        self.broker_configs.get(broker).map(String::as_str).or_else(|| config::broker_config(broker)?.default)
    }

    /// A numeric group config ([`State::group_config`]). A value set on the group is kept within
    /// its bounds as they are now (an operator who narrows a bound narrows the groups that set a
    /// value before); the cluster's value, used when the group sets none, is taken as it is.
    pub fn group_config_i64(&self, group_id: &str, name: &str) -> Option<i64> {
        let value: i64 = self.group_config(group_id, name)?.parse().ok()?;
        let set_on_group = self.group_configs.get(group_id).is_some_and(|c| c.contains_key(name));
        let Some(def) = config::group_config(name).filter(|_| set_on_group) else { return Some(value) };
        let value = def.min_bound.and_then(|min| self.broker_config_i64(min)).map_or(value, |min| value.max(min));
        Some(def.max_bound.and_then(|max| self.broker_config_i64(max)).map_or(value, |max| value.min(max)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    /// Runs `commands` on a cluster that applies format 8: their outcomes.
    fn run(commands: Vec<Command>) -> (State, Vec<Result<Outcome, CommandError>>) {
        let (state, mut outcomes) =
            crate::state::tests::run([vec![Command::SetFormat { format: 8 }], commands].concat());
        assert!(outcomes.remove(0).is_ok(), "the format is raised");
        (state, outcomes)
    }

    fn set(group: &str, pairs: &[(&str, &str)]) -> Command {
        let configs = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Command::SetGroupConfigs { group_id: group.to_owned(), configs }
    }

    #[test]
    fn group_configs_are_checked_stored_normalized_and_fall_back_to_broker_configs() {
        let (state, outcomes) = run(vec![
            set("g", &[("share.record.lock.duration.ms", " 20000 "), ("share.isolation.level", "read_committed")]),
            set("g", &[("share.record.lock.duration.ms", "5000")]),
            set("g", &[("share.record.lock.duration.ms", "90000")]),
            set("g", &[("retention.ms", "1")]),
            set("", &[("share.isolation.level", "read_committed")]),
        ]);
        assert!(outcomes[0].is_ok());
        for refused in &outcomes[1..] {
            assert!(refused.is_err(), "{outcomes:?}");
        }
        assert_eq!(state.group_config("g", "share.record.lock.duration.ms"), Some("20000"));
        assert_eq!(state.group_config("g", "share.isolation.level"), Some("read_committed"));
        assert_eq!(state.group_config("other", "share.record.lock.duration.ms"), Some("30000"));
        assert_eq!(state.group_config("g", "share.session.timeout.ms"), Some("45000"));
        assert_eq!(state.group_config("g", "no.such.config"), None);
    }

    #[test]
    fn bounds_follow_the_broker_configs_and_an_empty_set_removes_the_group() {
        let bounds = Command::SetBrokerConfigs {
            configs: [("group.share.min.record.lock.duration.ms".to_owned(), "1000".to_owned())].into(),
        };
        let (mut state, outcomes) = run(vec![
            bounds,
            set("g", &[("share.record.lock.duration.ms", "2000")]),
            Command::SetBrokerConfigs {
                configs: [("group.share.min.record.lock.duration.ms".to_owned(), "10000".to_owned())].into(),
            },
        ]);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(state.group_config_i64("g", "share.record.lock.duration.ms"), Some(10_000), "clamped to the bound");
        assert_eq!(state.group_config_i64("other", "share.record.lock.duration.ms"), Some(30_000));
        let index = state.applied_index + 1;
        assert!(state.apply(index, set("g", &[])).is_ok());
        assert!(state.group_configs.is_empty());
    }

    /// Until every metadata node runs format 8, its new rules stay off: no group configs, no ACLs
    /// on them, none of the bounds made dynamic; replicas of format 7 would refuse them. A format
    /// this binary does not know is refused too.
    #[test]
    fn format_8_rules_wait_for_the_cluster_to_apply_format_8() {
        use crate::acl::{AclBinding, AclOperation, AclPatternType, AclPermission, AclResourceType};
        let binding = AclBinding {
            resource_type: AclResourceType::Group,
            resource_name: "g".into(),
            pattern_type: AclPatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::AlterConfigs,
            permission: AclPermission::Allow,
        };
        let commands = || {
            vec![
                set("g", &[("share.isolation.level", "read_committed")]),
                Command::CreateAcls { tenant: String::new(), bindings: vec![binding.clone().into()] },
                Command::SetBrokerConfigs {
                    configs: [("group.share.min.record.lock.duration.ms".to_owned(), "1000".to_owned())].into(),
                },
                Command::SetBrokerConfigs {
                    configs: [("floe.share.auto.offset.reset".to_owned(), "by_duration:PT1H".to_owned())].into(),
                },
            ]
        };
        let refused = |outcome: &Result<Outcome, CommandError>| match outcome {
            Ok(Outcome::AclsCreated(results)) => results.iter().all(Result::is_err),
            other => other.is_err(),
        };
        let (before, outcomes) = crate::state::tests::run(commands());
        assert!(outcomes.iter().all(refused), "{outcomes:?}");
        assert!(before.acls.is_empty() && before.broker_configs.is_empty() && before.group_configs.is_empty());
        let (after, outcomes) = run(commands());
        assert!(!outcomes.iter().any(refused), "{outcomes:?}");
        assert!(!after.acls.is_empty() && after.broker_configs.len() == 1 && after.group_configs.len() == 1);
        let (_, newer) = crate::state::tests::run(vec![Command::SetFormat { format: crate::FORMAT_VERSION + 1 }]);
        assert!(newer[0].is_err());
    }

    /// Deleting a group or its tenant deletes its configs; a tenant configures at most as many
    /// groups as its groups quota.
    #[test]
    fn configs_go_with_their_group_and_tenant_and_stay_within_the_groups_quota() {
        let quotas = crate::state::TenantQuotas { groups: Some(1), ..Default::default() };
        let lock = [("share.delivery.count.limit", "3")];
        let (state, outcomes) = run(vec![
            Command::CreateTenant { name: "acme".into(), now_ms: 0 },
            Command::SetTenantQuotas { tenant: "acme".into(), quotas: quotas.into() },
            set("acme#1~a", &lock),
            set("acme#1~b", &lock),
            set("acme#1~a", &[("share.delivery.count.limit", "4")]),
            Command::StoreGroup { group_id: "g".into(), membership: Default::default(), now_ms: 0 },
            set("g", &lock),
            Command::DeleteGroup { group_id: "g".into() },
            Command::DeleteTenant { name: "acme".into() },
        ]);
        assert!(matches!(outcomes[3], Err(CommandError::QuotaExceeded(_))), "{outcomes:?}");
        assert!(outcomes[4].is_ok() && outcomes[7].is_ok() && outcomes[8].is_ok(), "{outcomes:?}");
        assert!(state.group_configs.is_empty(), "{:?}", state.group_configs);
    }
}
