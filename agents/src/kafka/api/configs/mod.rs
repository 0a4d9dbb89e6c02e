//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.
//!
//! Every standard Kafka topic, broker and group config is accepted, type-checked and reported
//! (the catalog in `floe_metadata::config`), including those with no meaning for Floe's
//! storage; their documentation says so. Only explicitly set configs are stored; everything
//! else is reported with its cluster-wide value or default, as Kafka does.

/// The config APIs name resources alike: a list of (type, name) answered one by one; topics and
/// groups by their own ACLs and scoped to the tenant, anything else through the cluster's (a
/// tenant may alter no broker config). Each config API declares its `Resources` with one line of this.
macro_rules! config_resources {
    ($request:ty, $response:ty, $answers:ident, $with_answers:ident, $answer:ty, $operation:expr) => {
        impl Resources for $request {
            fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), $response> {
                let walked = walk.configs(&mut self.resources, $operation, |c| (c.resource_type, &mut c.resource_name));
                walked.map_err(|refusal| {
                    let answers = self.resources.iter().map(|c| {
                        <$answer>::default()
                            .with_error_code(refusal.error)
                            .with_error_message(refusal.message.map(StrBytes::from_static_str))
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name.clone())
                    });
                    <$response>::default().$with_answers(answers.collect())
                })
            }

            fn walk_answer(response: &mut $response, walk: &AnswerWalk<'_>) {
                for answer in response.$answers.iter_mut().filter(|r| is_named_resource(r.resource_type)) {
                    walk.name(&mut answer.resource_name);
                }
            }

            fn answer_refused(response: &mut $response, refused: Refused) {
                response.$answers.extend(refused.names.into_iter().map(|n| {
                    <$answer>::default()
                        .with_error_code(n.error)
                        .with_resource_type(n.resource_type)
                        .with_resource_name(n.name)
                }));
            }
        }
    };
}

mod alter_configs;
mod describe_configs;
mod incremental_alter_configs;

use std::collections::BTreeMap;

use floe_metadata::Command;
use floe_metadata::config::{self, Applicability, ConfigDef, ConfigType};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::{self, code};
use super::super::resources::{
    AnswerWalk, CONFIG_RESOURCE_GROUP, CONFIG_RESOURCE_TOPIC, Op, Refused, Resources, Walk, is_named_resource,
};
use super::str_bytes;
use crate::Agent;

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse;

const RESOURCE_BROKER: i8 = 4;

const SOURCE_TOPIC_CONFIG: i8 = 1;

const SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;

const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;

const SOURCE_DEFAULT_CONFIG: i8 = 5;

const SOURCE_GROUP_CONFIG: i8 = 8;

const OP_SET: i8 = 0;

const OP_DELETE: i8 = 1;

const OP_APPEND: i8 = 2;

const OP_SUBTRACT: i8 = 3;

fn type_code(t: ConfigType) -> i8 {
    match t {
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Short => 4,
        ConfigType::Long => 5,
        ConfigType::Double => 6,
        ConfigType::List => 7,
        ConfigType::Class => 8,
        ConfigType::Password => 9,
    }
}

fn documentation(def: &ConfigDef) -> String {
    match def.applicability {
        Applicability::Applied => def.doc.to_owned(),
        Applicability::NotApplicable(why) => format!("{} Not applicable in Floe: {why}", def.doc),
    }
}

fn entry(
    def: &ConfigDef,
    value: Option<&str>,
    source: i8,
    broker_value: Option<&str>,
    synonyms: bool,
    docs: bool,
) -> DescribeConfigsResourceResult {
    let shown = if def.sensitive { None } else { value.map(|v| StrBytes::from_string(v.to_owned())) };
    let mut synonym_list = Vec::new();
    if synonyms {
        synonym_list.push(
            DescribeConfigsSynonym::default()
                .with_name(str_bytes(def.name))
                .with_value(shown.clone())
                .with_source(source),
        );
        if let Some(broker) = def.broker_synonym.and_then(config::broker_config) {
            if let Some(dynamic) = broker_value {
                synonym_list.push(
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(broker.name))
                        .with_value(Some(str_bytes(dynamic)))
                        .with_source(SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
                );
            }
            synonym_list.push(
                DescribeConfigsSynonym::default()
                    .with_name(str_bytes(broker.name))
                    .with_value(def.default.map(str_bytes))
                    .with_source(SOURCE_DEFAULT_CONFIG),
            );
        }
    }
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(def.name))
        .with_value(shown)
        .with_read_only(def.read_only)
        .with_config_source(source)
        .with_is_sensitive(def.sensitive)
        .with_synonyms(synonym_list)
        .with_config_type(type_code(def.config_type))
        .with_documentation(docs.then(|| str_bytes(documentation(def))))
}

fn wanted(keys: Option<&[StrBytes]>, name: &str) -> bool {
    keys.is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
}

/// Every topic config with its effective value and source: set on the topic, set dynamically
/// for the cluster (through the broker synonym), or Kafka's default.
pub(super) fn topic_listing(
    configs: &BTreeMap<String, String>,
    broker_configs: &BTreeMap<String, String>,
    keys: Option<&[StrBytes]>,
    synonyms: bool,
    docs: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let shown = Shown { keys, synonyms, docs };
    resource_listing(config::TOPIC_CONFIGS, SOURCE_TOPIC_CONFIG, configs, broker_configs, shown)
}

/// Every group config with its effective value and source, as for a topic.
fn group_listing(
    configs: &BTreeMap<String, String>,
    broker_configs: &BTreeMap<String, String>,
    shown: Shown<'_>,
) -> Vec<DescribeConfigsResourceResult> {
    resource_listing(config::GROUP_CONFIGS, SOURCE_GROUP_CONFIG, configs, broker_configs, shown)
}

/// What a DescribeConfigs request asks to see.
#[derive(Clone, Copy)]
struct Shown<'a> {
    keys: Option<&'a [StrBytes]>,
    synonyms: bool,
    docs: bool,
}

/// The configs of `table` for one resource: set on it (reported with `set_source`), set for the
/// cluster through the broker synonym, or Kafka's default.
fn resource_listing(
    table: &'static [ConfigDef],
    set_source: i8,
    configs: &BTreeMap<String, String>,
    broker_configs: &BTreeMap<String, String>,
    Shown { keys, synonyms, docs }: Shown<'_>,
) -> Vec<DescribeConfigsResourceResult> {
    table
        .iter()
        .filter(|def| wanted(keys, def.name))
        .map(|def| {
            let broker_value = def.broker_synonym.and_then(|b| broker_configs.get(b)).map(String::as_str);
            match (configs.get(def.name), broker_value) {
                (Some(value), _) => entry(def, Some(value), set_source, broker_value, synonyms, docs),
                (None, Some(dynamic)) => {
                    entry(def, Some(dynamic), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, broker_value, synonyms, docs)
                }
                (None, None) => entry(def, def.default, SOURCE_DEFAULT_CONFIG, None, synonyms, docs),
            }
        })
        .collect()
}

/// Broker configs: dynamic cluster-wide values first, then the agent's own settings as static
/// configs, the rest at their defaults.
fn broker_listing(
    agent: &Agent,
    dynamic: &BTreeMap<String, String>,
    keys: Option<&[StrBytes]>,
    synonyms: bool,
    docs: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let node_id = agent.config.node_id.to_string();
    let auto_create = agent.config.auto_create_topics.to_string();
    let partitions = agent.config.default_partition_count.to_string();
    config::BROKER_CONFIGS
        .iter()
        .filter(|def| wanted(keys, def.name))
        .map(|def| {
            let static_value = match def.name {
                "broker.id" | "node.id" => Some(node_id.as_str()),
                "auto.create.topics.enable" => Some(auto_create.as_str()),
                "num.partitions" => Some(partitions.as_str()),
                _ => None,
            };
            match (dynamic.get(def.name), static_value) {
                (Some(value), _) => entry(def, Some(value), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, None, synonyms, docs),
                (None, Some(value)) => entry(def, Some(value), SOURCE_STATIC_BROKER_CONFIG, None, synonyms, docs),
                (None, None) => entry(def, def.default, SOURCE_DEFAULT_CONFIG, None, synonyms, docs),
            }
        })
        .collect()
}

fn is_this_broker(agent: &Agent, name: &str) -> bool {
    name.is_empty() || name == agent.config.node_id.to_string()
}

type Failure = (i16, String);

fn invalid_config(message: impl Into<String>) -> Failure {
    (code::INVALID_CONFIG, message.into())
}

/// A resource whose configs can be altered.
enum Target {
    Topic(String),
    /// A group's configs (its stored id); the group need not exist yet.
    Group(String),
    /// The cluster-wide dynamic broker configs (resource name "" or this agent's id).
    Brokers,
}

impl Target {
    fn resolve(agent: &Agent, resource_type: i8, name: &str) -> Result<Self, Failure> {
        match resource_type {
            CONFIG_RESOURCE_TOPIC => Ok(Self::Topic(name.to_owned())),
            CONFIG_RESOURCE_GROUP if name.is_empty() => {
                Err((code::INVALID_REQUEST, "a group config resource names a group".to_owned()))
            }
            CONFIG_RESOURCE_GROUP => Ok(Self::Group(name.to_owned())),
            RESOURCE_BROKER if is_this_broker(agent, name) => Ok(Self::Brokers),
            RESOURCE_BROKER => {
                Err((code::INVALID_REQUEST, format!("this agent is broker {}, not {name}", agent.config.node_id)))
            }
            other => Err((code::INVALID_REQUEST, format!("resource type {other} is not supported"))),
        }
    }

    fn definition(&self, name: &str) -> Result<&'static ConfigDef, Failure> {
        let def = match self {
            Self::Topic(_) => config::topic_config(name),
            Self::Group(_) => config::group_config(name),
            Self::Brokers => config::broker_config(name),
        };
        let def = def.ok_or_else(|| invalid_config(format!("unknown config {name}")))?;
        if matches!(self, Self::Brokers) && def.read_only {
            return Err(invalid_config(format!("{name} cannot be changed dynamically; set it on the command line")));
        }
        Ok(def)
    }

    /// The currently set (non-default) configs.
    fn current(&self, agent: &Agent) -> Result<BTreeMap<String, String>, Failure> {
        let state = agent.metadata.read();
        match self {
            Self::Topic(name) => state
                .topic_by_name(name)
                .map(|t| t.configs.clone())
                .ok_or_else(|| (code::UNKNOWN_TOPIC_OR_PARTITION, format!("unknown topic {name}"))),
            Self::Group(group_id) => Ok(state.group_configs.get(group_id).cloned().unwrap_or_default()),
            Self::Brokers => Ok(state.broker_configs.clone()),
        }
    }

    /// Stores the new set of configs (or only checks the resource exists, for `validate_only`).
    async fn store(
        &self,
        agent: &Agent,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), Failure> {
        self.current(agent)?;
        if let Self::Group(group_id) = self {
            // A node of an older format could not read the command: none is proposed until the
            // cluster applies format 8.
            if !agent.metadata.read().applies_format(8) {
                let why = "group configs need every metadata node on format 8 (an upgrade is under way)";
                return Err((code::INVALID_CONFIG, why.to_owned()));
            }
            // Bounds (broker configs) are checked here too, so validate_only answers as a change would.
            let checked = agent.metadata.read().check_group_configs(group_id, &configs);
            checked.map_err(|e| (error_code::for_command(&e).code(), e.to_string()))?;
        }
        if validate_only {
            return Ok(());
        }
        let command = match self {
            Self::Topic(name) => Command::SetTopicConfigs { name: name.clone(), configs },
            Self::Group(group_id) => Command::SetGroupConfigs { group_id: group_id.clone(), configs },
            Self::Brokers => Command::SetBrokerConfigs { configs },
        };
        agent.metadata.propose(command).await.map(|_| ()).map_err(|e| (error_code::for_node(&e).code(), e.to_string()))
    }
}
