//! Topic lifecycle: create, delete, grow, configure.

use std::collections::BTreeMap;

use super::{IndexEntry, State, TenantTable, Topic, TopicId};
use crate::command::{CommandError, Outcome};
use crate::limits::{
    CONFIG_VALUE_BYTES_MAX, TOPIC_CONFIG_COUNT_MAX, TOPIC_COUNT_MAX, TOPIC_NAME_BYTES_MAX, TOPIC_PARTITION_COUNT_MAX,
};

/// Kafka's topic name rules: 1..=249 bytes of `[a-zA-Z0-9._-]`, not `.` or `..`; a tenant's
/// topic is stored as `KEY~NAME` (see [`crate::namespace`]), where NAME follows those rules.
pub fn validate_topic_name(stored: &str) -> Result<(), CommandError> {
    let name = match stored.split_once(crate::namespace::SEPARATOR) {
        Some((key, name)) => {
            let tenant = crate::namespace::parse_key(key).map(|(tenant, _)| tenant);
            if tenant.is_none_or(|t| super::security::check_name("tenant", t).is_err()) {
                return Err(CommandError::InvalidTopicName {
                    name: stored.to_owned(),
                    reason: "not a valid tenant namespace key before '~'".to_owned(),
                });
            }
            name
        }
        None => stored,
    };
    let invalid = |reason: &str| CommandError::InvalidTopicName { name: name.to_owned(), reason: reason.to_owned() };
    if name.is_empty() {
        return Err(invalid("topic names cannot be empty"));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(invalid(&format!("longer than {TOPIC_NAME_BYTES_MAX} characters")));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are not allowed"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return Err(invalid("only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

fn validate_partition_count(count: i32) -> Result<(), CommandError> {
    if !(1..=TOPIC_PARTITION_COUNT_MAX).contains(&count) {
        return Err(CommandError::InvalidPartitions {
            count,
            reason: format!("must be between 1 and {TOPIC_PARTITION_COUNT_MAX}"),
        });
    }
    Ok(())
}

fn validate_configs(configs: &BTreeMap<String, String>) -> Result<(), CommandError> {
    if configs.len() > TOPIC_CONFIG_COUNT_MAX {
        return Err(CommandError::InvalidConfig(format!("more than {TOPIC_CONFIG_COUNT_MAX} configs")));
    }
    for (name, value) in configs {
        if value.len() > CONFIG_VALUE_BYTES_MAX {
            return Err(CommandError::InvalidConfig(format!(
                "{name}: value longer than {CONFIG_VALUE_BYTES_MAX} bytes"
            )));
        }
        crate::config::validate_topic_config(name, value).map_err(|e| CommandError::InvalidConfig(e.to_string()))?;
    }
    Ok(())
}

impl State {
    pub(super) fn create_topic(
        &mut self,
        name: String,
        topic_id: TopicId,
        partition_count: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Outcome, CommandError> {
        validate_topic_name(&name)?;
        validate_partition_count(partition_count)?;
        validate_configs(&configs)?;
        if self.topic_ids.contains_key(&name) {
            return Err(CommandError::TopicExists(name));
        }
        if self.topics.len() >= TOPIC_COUNT_MAX {
            return Err(CommandError::LimitReached(format!("at most {TOPIC_COUNT_MAX} topics")));
        }
        if self.topics.contains_key(&topic_id) || topic_id.is_nil() {
            return Err(CommandError::InvalidCommit(format!("topic id {topic_id} is already used or nil")));
        }
        match self.owning_tenant(&name) {
            Some(tenant) => self.check_table_quota(tenant, TenantTable::Topics)?,
            // A late create from a session of a deleted tenant lands nowhere.
            None if crate::namespace::key_of(&name).is_some() => {
                return Err(CommandError::InvalidTopicName {
                    name,
                    reason: "no tenant has this namespace (was it deleted?)".to_owned(),
                });
            }
            None => {}
        }
        self.check_partition_quota(&name, partition_count as usize)?;
        let partitions = (0..partition_count).map(|_| Default::default()).collect();
        self.topic_ids.insert(name.clone(), topic_id);
        self.topics.insert(topic_id, Topic { name, topic_id, configs, partitions });
        self.changed.everything();
        Ok(Outcome::TopicCreated { topic_id })
    }

    pub(super) fn delete_topic(&mut self, name: &str) -> Result<Outcome, CommandError> {
        let topic_id = self.topic_ids.remove(name).ok_or(CommandError::UnknownTopicOrPartition)?;
        let topic = self.topics.remove(&topic_id).expect("topic_ids and topics agree");
        self.changed.everything();
        for partition in topic.partitions {
            for object_id in partition.index.iter().filter_map(IndexEntry::object_id) {
                self.release_object(object_id);
            }
        }
        self.forget_topic_offsets(name);
        self.forget_topic_producers(topic_id);
        self.tables.remove(&topic_id);
        self.forget_topic_share_partitions(topic_id);
        self.mirror_topics.remove(&topic_id);
        self.mirror_truncations.retain(|(t, _), _| *t != topic_id);
        Ok(Outcome::Done)
    }

    pub(super) fn create_partitions(&mut self, name: &str, partition_count: i32) -> Result<Outcome, CommandError> {
        validate_partition_count(partition_count)?;
        let topic_id = *self.topic_ids.get(name).ok_or(CommandError::UnknownTopicOrPartition)?;
        let topic = self.topics.get_mut(&topic_id).expect("topic_ids and topics agree");
        let current = topic.partitions.len();
        let wanted = usize::try_from(partition_count).expect("validated positive");
        if wanted <= current {
            return Err(CommandError::InvalidPartitions {
                count: partition_count,
                reason: format!("topic already has {current} partitions; the count can only grow"),
            });
        }
        self.check_partition_quota(name, wanted - current)?;
        let topic = self.topics.get_mut(&topic_id).expect("topic_ids and topics agree");
        topic.partitions.resize_with(wanted, Default::default);
        self.changed.everything();
        Ok(Outcome::Done)
    }

    pub(super) fn set_topic_configs(
        &mut self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Outcome, CommandError> {
        validate_configs(&configs)?;
        let topic_id = *self.topic_ids.get(name).ok_or(CommandError::UnknownTopicOrPartition)?;
        self.topics.get_mut(&topic_id).expect("topic_ids and topics agree").configs = configs;
        Ok(Outcome::Done)
    }
}

impl State {
    pub(super) fn set_broker_configs(&mut self, configs: BTreeMap<String, String>) -> Result<Outcome, CommandError> {
        if configs.len() > TOPIC_CONFIG_COUNT_MAX {
            return Err(CommandError::InvalidConfig(format!("more than {TOPIC_CONFIG_COUNT_MAX} configs")));
        }
        for (name, value) in &configs {
            if value.len() > CONFIG_VALUE_BYTES_MAX {
                return Err(CommandError::InvalidConfig(format!(
                    "{name}: value longer than {CONFIG_VALUE_BYTES_MAX} bytes"
                )));
            }
            let normalized = crate::config::validate_broker_config(name, value)
                .map_err(|e| CommandError::InvalidConfig(e.to_string()))?;
            if crate::config::broker_config(name).is_some_and(|d| d.read_only) {
                return Err(CommandError::InvalidConfig(format!("{name} cannot be changed dynamically")));
            }
            if !self.applies_format(8) && crate::config::needs_format_8(name, &normalized) {
                return Err(CommandError::InvalidConfig(format!(
                    "{name}={normalized} needs every metadata node on format 8"
                )));
            }
            // A broker value that backs a topic default must also be a valid topic value.
            if let Some(topic_def) =
                crate::config::TOPIC_CONFIGS.iter().find(|d| d.broker_synonym == Some(name.as_str()))
            {
                topic_def.validate(&normalized).map_err(|e| CommandError::InvalidConfig(e.to_string()))?;
            }
        }
        self.broker_configs = configs;
        Ok(Outcome::Done)
    }
}
