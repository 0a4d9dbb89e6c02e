//! A source cluster: its brokers, a connection to each that is asked something, and the
//! requests a link makes.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeAclsRequest, DescribeConfigsRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::ClientError;
use crate::connection::{BrokerConnection, SourceConfig};

/// How long a request may take beyond what it asks the broker to wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What a Metadata request showed of the source.
#[derive(Clone, Debug, Default)]
pub struct SourceMetadata {
    pub brokers: BTreeMap<i32, String>,
    pub topics: Vec<SourceTopic>,
}

#[derive(Clone, Debug)]
pub struct SourceTopic {
    pub name: String,
    pub is_internal: bool,
    /// The topic's error (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, ...), or 0.
    pub error_code: i16,
    pub partitions: Vec<SourcePartition>,
}

#[derive(Clone, Copy, Debug)]
pub struct SourcePartition {
    pub index: i32,
    /// `-1` while the partition has no leader.
    pub leader: i32,
}

/// One partition of a fetch answer: its error, its offsets and its batches as sent.
#[derive(Clone, Debug)]
pub struct FetchedPartition {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Bytes,
}

/// A group's committed offset of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub metadata: String,
}

/// One ACL binding of the source, in Kafka's wire codes (resource type 2 topic, 3 group, ...;
/// pattern type 3 literal, 4 prefixed; operation and permission as Kafka numbers them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceAcl {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// A source cluster and the connections open to it.
#[derive(Debug)]
pub struct SourceCluster {
    config: SourceConfig,
    brokers: BTreeMap<i32, String>,
    connections: BTreeMap<i32, BrokerConnection>,
    /// The connection made through a bootstrap address, until a broker id is known for it.
    bootstrap: Option<BrokerConnection>,
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn kafka(api: &'static str, code: i16) -> Result<(), ClientError> {
    if code == 0 { Ok(()) } else { Err(ClientError::Kafka { api, code, message: None }) }
}

impl SourceCluster {
    /// Connects through the first bootstrap address that answers.
    pub async fn connect(config: SourceConfig) -> Result<Self, ClientError> {
        let mut last = String::from("no bootstrap servers given");
        for addr in &config.bootstrap {
            match BrokerConnection::connect(addr, &config).await {
                Ok(connection) => {
                    let mut cluster = Self {
                        config,
                        brokers: BTreeMap::new(),
                        connections: BTreeMap::new(),
                        bootstrap: Some(connection),
                    };
                    cluster.metadata().await?;
                    return Ok(cluster);
                }
                // The source told us who we are not: no other address will say otherwise.
                Err(e) if e.is_refusal() => return Err(e),
                Err(e) => last = e.to_string(),
            }
        }
        Err(ClientError::NoBroker(last))
    }

    /// A connection to broker `id` (any broker for `None`), opened if needed.
    async fn connection(&mut self, id: Option<i32>) -> Result<&mut BrokerConnection, ClientError> {
        let id = match id {
            Some(id) => id,
            None => match (self.connections.keys().next(), &self.bootstrap) {
                (_, Some(_)) => return self.bootstrap.as_mut().ok_or(ClientError::NoBroker(String::new())),
                (Some(id), None) => *id,
                (None, None) => {
                    *self.brokers.keys().next().ok_or_else(|| ClientError::NoBroker("no broker known".into()))?
                }
            },
        };
        if !self.connections.contains_key(&id) {
            let addr = self
                .brokers
                .get(&id)
                .cloned()
                .ok_or_else(|| ClientError::NoBroker(format!("broker {id} is unknown")))?;
            let connection = BrokerConnection::connect(&addr, &self.config).await?;
            self.connections.insert(id, connection);
        }
        self.connections.get_mut(&id).ok_or_else(|| ClientError::NoBroker(format!("broker {id}")))
    }

    /// Forgets a connection after an error, so the next request opens a fresh one.
    fn drop_connection(&mut self, id: Option<i32>) {
        match id {
            Some(id) => {
                self.connections.remove(&id);
            }
            None => self.bootstrap = None,
        }
    }

    async fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        broker: Option<i32>,
        api: &'static str,
        highest: i16,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        let result = async {
            let connection = self.connection(broker).await?;
            let version = connection.version::<R>(api, highest)?;
            let addr = connection.addr().to_owned();
            tokio::time::timeout(timeout, connection.call(request, version))
                .await
                .map_err(|_| ClientError::Timeout { addr, seconds: timeout.as_secs() })?
        }
        .await;
        if result.is_err() {
            self.drop_connection(broker);
        }
        result
    }

    /// Every topic of the source, with partition leaders; refreshes the brokers known.
    pub async fn metadata(&mut self) -> Result<SourceMetadata, ClientError> {
        let mut request = MetadataRequest::default();
        // Null asks for every topic (an empty list for none).
        request.topics = None;
        let response = self.call(None, "Metadata", 12, &request, REQUEST_TIMEOUT).await?;
        let brokers: BTreeMap<i32, String> =
            response.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
        if brokers.is_empty() {
            return Err(ClientError::Kafka { api: "Metadata", code: -1, message: Some("no brokers listed".into()) });
        }
        // Brokers that moved get a fresh connection.
        self.connections.retain(|id, c| brokers.get(id).is_some_and(|a| a == c.addr()));
        self.brokers = brokers.clone();
        let topics = response
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.to_string();
                let mut partitions: Vec<SourcePartition> = t
                    .partitions
                    .iter()
                    .map(|p| SourcePartition { index: p.partition_index, leader: p.leader_id.0 })
                    .collect();
                partitions.sort_by_key(|p| p.index);
                Some(SourceTopic { name, is_internal: t.is_internal, error_code: t.error_code, partitions })
            })
            .collect();
        Ok(SourceMetadata { brokers, topics })
    }

    /// Each partition's offset at `timestamp` (`-2`: the log start, `-1`: the log end), asked of
    /// its leader; a partition's own error is returned as its `Err`.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[SourcePartition],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, Result<i64, i16>>, ClientError> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in partitions {
            by_leader.entry(p.leader).or_default().push(p.index);
        }
        let mut out = BTreeMap::new();
        for (leader, indexes) in by_leader {
            if leader < 0 {
                // LEADER_NOT_AVAILABLE.
                out.extend(indexes.into_iter().map(|i| (i, Err(5))));
                continue;
            }
            let mut request = ListOffsetsRequest::default();
            request.replica_id = BrokerId(-1);
            let mut wanted = ListOffsetsTopic::default();
            wanted.name = topic_name(topic);
            wanted.partitions = indexes
                .iter()
                .map(|i| {
                    let mut p = ListOffsetsPartition::default();
                    p.partition_index = *i;
                    p.current_leader_epoch = -1;
                    p.timestamp = timestamp;
                    p
                })
                .collect();
            request.topics = vec![wanted];
            let response = self.call(Some(leader), "ListOffsets", 8, &request, REQUEST_TIMEOUT).await?;
            for t in response.topics {
                for p in t.partitions {
                    let answer = if p.error_code == 0 { Ok(p.offset) } else { Err(p.error_code) };
                    out.insert(p.partition_index, answer);
                }
            }
        }
        Ok(out)
    }

    /// Batches of the given partitions from `offset` on, read uncommitted (aborted data and
    /// transaction markers included), from one leader.
    pub async fn fetch(
        &mut self,
        leader: i32,
        wants: &[(String, i32, i64)],
        partition_max_bytes: i32,
        max_wait: Duration,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (topic, partition, offset) in wants {
            let mut p = FetchPartition::default();
            p.partition = *partition;
            p.current_leader_epoch = -1;
            p.fetch_offset = *offset;
            p.last_fetched_epoch = -1;
            p.log_start_offset = -1;
            p.partition_max_bytes = partition_max_bytes;
            topics.entry(topic.as_str()).or_default().push(p);
        }
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
        request.min_bytes = 1;
        request.max_bytes = partition_max_bytes.saturating_mul(4);
        request.isolation_level = 0;
        request.session_id = 0;
        request.session_epoch = -1;
        request.topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut t = FetchTopic::default();
                t.topic = topic_name(name);
                t.partitions = partitions;
                t
            })
            .collect();
        let response = self.call(Some(leader), "Fetch", 12, &request, max_wait + REQUEST_TIMEOUT).await?;
        kafka("Fetch", response.error_code)?;
        let mut out = Vec::new();
        for t in response.responses {
            for p in t.partitions {
                out.push(FetchedPartition {
                    topic: t.topic.0.to_string(),
                    partition: p.partition_index,
                    error_code: p.error_code,
                    high_watermark: p.high_watermark,
                    log_start_offset: p.log_start_offset,
                    records: p.records.unwrap_or_default(),
                });
            }
        }
        Ok(out)
    }

    /// The configs set on each topic (not defaults, not sensitive ones).
    pub async fn topic_configs(
        &mut self,
        topics: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, ClientError> {
        let mut request = DescribeConfigsRequest::default();
        request.resources = topics
            .iter()
            .map(|name| {
                let mut r = kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default();
                r.resource_type = 2;
                r.resource_name = StrBytes::from_string(name.clone());
                r.configuration_keys = None;
                r
            })
            .collect();
        let response = self.call(None, "DescribeConfigs", 4, &request, REQUEST_TIMEOUT).await?;
        let mut out = BTreeMap::new();
        for result in response.results {
            if result.error_code != 0 {
                continue;
            }
            // Config source 1 is DYNAMIC_TOPIC_CONFIG: set on the topic itself.
            let set = result
                .configs
                .into_iter()
                .filter(|c| c.config_source == 1 && !c.is_sensitive)
                .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
                .collect();
            out.insert(result.resource_name.to_string(), set);
        }
        Ok(out)
    }

    /// Every ACL binding of the source (DescribeAcls with a filter matching all).
    pub async fn describe_acls(&mut self) -> Result<Vec<SourceAcl>, ClientError> {
        const ANY: i8 = 1;
        let mut request = DescribeAclsRequest::default();
        request.resource_type_filter = ANY;
        request.resource_name_filter = None;
        request.pattern_type_filter = ANY;
        request.principal_filter = None;
        request.host_filter = None;
        request.operation = ANY;
        request.permission_type = ANY;
        let response = self.call(None, "DescribeAcls", 3, &request, REQUEST_TIMEOUT).await?;
        if response.error_code != 0 {
            return Err(ClientError::Kafka {
                api: "DescribeAcls",
                code: response.error_code,
                message: response.error_message.map(|m| m.to_string()),
            });
        }
        let mut out = Vec::new();
        for resource in response.resources {
            for acl in resource.acls {
                out.push(SourceAcl {
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.to_string(),
                    pattern_type: resource.pattern_type,
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: acl.operation,
                    permission: acl.permission_type,
                });
            }
        }
        Ok(out)
    }

    /// Every consumer group of the source: each broker lists the groups it coordinates.
    pub async fn list_groups(&mut self) -> Result<Vec<String>, ClientError> {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        let mut groups = Vec::new();
        for id in ids {
            let response = self.call(Some(id), "ListGroups", 4, &ListGroupsRequest::default(), REQUEST_TIMEOUT).await?;
            kafka("ListGroups", response.error_code)?;
            groups.extend(response.groups.into_iter().map(|g| g.group_id.0.to_string()));
        }
        groups.sort();
        groups.dedup();
        Ok(groups)
    }

    /// A group's committed offsets, asked of its coordinator.
    pub async fn group_offsets(&mut self, group: &str) -> Result<Vec<GroupOffset>, ClientError> {
        let mut find = FindCoordinatorRequest::default();
        find.key = StrBytes::from_string(group.to_owned());
        find.key_type = 0;
        let found = self.call(None, "FindCoordinator", 3, &find, REQUEST_TIMEOUT).await?;
        kafka("FindCoordinator", found.error_code)?;
        let coordinator = found.node_id.0;
        self.brokers.entry(coordinator).or_insert_with(|| format!("{}:{}", found.host.as_str(), found.port));
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        request.topics = None;
        let response = self.call(Some(coordinator), "OffsetFetch", 7, &request, REQUEST_TIMEOUT).await?;
        kafka("OffsetFetch", response.error_code)?;
        let mut out = Vec::new();
        for t in response.topics {
            for p in t.partitions.into_iter().filter(|p| p.error_code == 0 && p.committed_offset >= 0) {
                out.push(GroupOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                });
            }
        }
        Ok(out)
    }
}
