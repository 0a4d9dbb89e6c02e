//! Each topic's produce policy and schema validation, read from its configs once per state
//! version rather than on every Produce: at thousands of partitions a request carries about one
//! partition, so "once per topic" was once per request, about ten config lookups each
//! (`floe_metadata::State::topic_config_value`: topic, then broker synonyms), 5% of the agent's
//! CPU at 2,000 partitions.

use std::sync::Mutex;

use floe_metadata::locks::MutexRecovery;
use floe_metadata::{State, Topic, TopicId};
use rustc_hash::FxHashMap;

use super::TopicPolicy;
use super::schemas::SchemaValidation;

/// Entries kept beyond the topics the state holds before stale ones are dropped (deleted
/// topics' entries go then).
const STALE_ENTRIES_MAX: usize = 64;

/// What the configs said, and the state version they were read at.
#[derive(Clone, Copy, Debug)]
struct Read {
    at: (u64, u64),
    policy: TopicPolicy,
    schemas: Option<SchemaValidation>,
}

/// The cache; one per agent.
#[derive(Debug, Default)]
pub struct TopicPolicies {
    by_topic: Mutex<FxHashMap<TopicId, Read>>,
}

impl TopicPolicies {
    /// `topic`'s policy and schema validation as `state` says. Any applied change may have changed
    /// a config (a topic's or a broker default), so an entry holds only for the state version
    /// (generation, applied index) it was read at.
    pub fn get(&self, state: &State, topic: &Topic) -> (TopicPolicy, Option<SchemaValidation>) {
        let at = (state.generation, state.applied_index);
        let mut by_topic = self.by_topic.lock_recovered();
        if let Some(read) = by_topic.get(&topic.topic_id).filter(|r| r.at == at) {
            return (read.policy, read.schemas);
        }
        let read = Read {
            at,
            policy: TopicPolicy::for_topic(state, topic),
            schemas: SchemaValidation::for_topic(state, topic),
        };
        if by_topic.len() > state.topics.len() + STALE_ENTRIES_MAX {
            by_topic.retain(|_, r| r.at == at);
        }
        by_topic.insert(topic.topic_id, read);
        (read.policy, read.schemas)
    }
}

#[cfg(test)]
mod tests {
    use floe_metadata::Command;

    use super::*;

    #[test]
    fn a_config_change_is_seen_by_the_next_produce() {
        let topic_id = TopicId::from_u128(1);
        let mut state = State::default();
        let create =
            Command::CreateTopic { name: "t".into(), topic_id, partition_count: 1, configs: Default::default() };
        state.apply(1, create).expect("topic");
        let policies = TopicPolicies::default();
        let topic = |s: &State| s.topics[&topic_id].clone();
        assert!(!policies.get(&state, &topic(&state)).0.log_append_time);
        let alter = Command::SetTopicConfigs {
            name: "t".into(),
            configs: [("message.timestamp.type".to_owned(), "LogAppendTime".to_owned())].into(),
        };
        state.apply(2, alter).expect("alter");
        assert!(policies.get(&state, &topic(&state)).0.log_append_time, "read again after a change");
    }
}
