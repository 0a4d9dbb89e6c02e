//! OffsetFetch: committed offsets, read with a linearizable read on the metadata leader.

use super::*;

/// One group's answer to OffsetFetch: its offsets by topic, or the error for the whole group.
type GroupOffsets = Result<Vec<(String, Vec<FetchedOffset>)>, ResponseError>;

/// Asks the coordinator on the metadata leader, never this agent's mirror: a mirror that
/// follows a lagging node (or was just copied from one after a restart) can hold an older
/// commit than the group's latest, and a consumer resuming there would process records again
/// and move the committed offset back. While no leader can confirm a read the request waits;
/// after [`CONFIRMED_READ_WAIT`] each group answers COORDINATOR_LOAD_IN_PROGRESS. Never a
/// partition-level error: librdkafka starts a partition whose OffsetFetch it cannot retry at
/// the offset in the answer, and -1 there means `auto.offset.reset`.
async fn fetch_offsets(
    agent: &Agent,
    groups: Vec<(String, AskedPartitions)>,
    require_stable: bool,
) -> Vec<GroupOffsets> {
    let deadline = tokio::time::Instant::now() + CONFIRMED_READ_WAIT;
    loop {
        let request = GroupRequest::FetchOffsets { groups: groups.clone(), require_stable };
        let fetched = ask(agent, request, |r| match r {
            GroupResponse::FetchOffsets(fetched) => Some(fetched),
            _ => None,
        })
        .await;
        let why = match fetched {
            Ok(fetched) if fetched.len() == groups.len() => return fetched.into_iter().map(Ok).collect(),
            Ok(_) => "the coordinator answered for other groups".to_owned(),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() + CONFIRMED_READ_RETRY_PAUSE >= deadline {
            crate::log_limited!(
                tracing::Level::WARN,
                why,
                "committed offsets not confirmed by a metadata leader in time"
            );
            return groups.iter().map(|_| Err(ResponseError::CoordinatorLoadInProgress)).collect();
        }
        tracing::debug!(why, "committed offsets not confirmed by a metadata leader yet; asking again");
        tokio::time::sleep(CONFIRMED_READ_RETRY_PAUSE).await;
    }
}

fn fetched_error_code(f: &FetchedOffset) -> i16 {
    if f.unstable { ResponseError::UnstableOffsetCommit.code() } else { 0 }
}

pub(in crate::kafka) async fn offset_fetch(
    agent: &Agent,
    version: i16,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let asked = |topics: Option<Vec<(TopicName, Vec<i32>)>>| {
        topics.map(|ts| ts.into_iter().map(|(name, partitions)| (name.to_string(), partitions)).collect())
    };
    if version < 8 {
        let topics = request.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
        let groups = vec![(request.group_id.to_string(), asked(topics))];
        let answer = fetch_offsets(agent, groups, request.require_stable).await.pop();
        let (topics, error) = match answer {
            Some(Ok(topics)) => (topics, None),
            Some(Err(e)) => (Vec::new(), Some(e)),
            None => (Vec::new(), Some(ResponseError::CoordinatorLoadInProgress)),
        };
        let topics = topics
            .into_iter()
            .map(|(name, fetched)| {
                let partitions = fetched
                    .into_iter()
                    .map(|f| {
                        let entry = OffsetFetchResponsePartition::default()
                            .with_partition_index(f.partition)
                            .with_error_code(fetched_error_code(&f))
                            .with_committed_offset(f.offset)
                            .with_metadata(Some(str_bytes(f.metadata)));
                        if version >= 5 { entry.with_committed_leader_epoch(f.leader_epoch) } else { entry }
                    })
                    .collect();
                OffsetFetchResponseTopic::default().with_name(TopicName(str_bytes(name))).with_partitions(partitions)
            })
            .collect();
        let response = OffsetFetchResponse::default().with_topics(topics);
        // v0–1 have no top-level error: their clients always name the partitions, so they see
        // the per-partition answer.
        return match error {
            Some(e) if version >= 2 => response.with_error_code(e.code()),
            _ => response,
        };
    }
    let ids: Vec<GroupId> = request.groups.iter().map(|g| g.group_id.clone()).collect();
    let groups = request
        .groups
        .into_iter()
        .map(|g| {
            let topics = g.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
            (g.group_id.to_string(), asked(topics))
        })
        .collect();
    let answers = fetch_offsets(agent, groups, request.require_stable).await;
    let groups = ids
        .into_iter()
        .zip(answers)
        .map(|(group_id, answer)| {
            let group = OffsetFetchResponseGroup::default().with_group_id(group_id);
            let topics = match answer {
                Ok(topics) => topics,
                Err(e) => return group.with_error_code(e.code()),
            };
            let topics = topics
                .into_iter()
                .map(|(name, fetched)| {
                    let partitions = fetched
                        .into_iter()
                        .map(|f| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(f.partition)
                                .with_error_code(fetched_error_code(&f))
                                .with_committed_offset(f.offset)
                                .with_committed_leader_epoch(f.leader_epoch)
                                .with_metadata(Some(str_bytes(f.metadata)))
                        })
                        .collect();
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(str_bytes(name)))
                        .with_partitions(partitions)
                })
                .collect();
            group.with_topics(topics)
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

impl KafkaApi for OffsetFetchRequest {
    const VERSIONS: (i16, i16) = (1, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, version| async move { ResponseKind::OffsetFetch(offset_fetch(&agent, version, self).await) },
        )
    }
}

impl Resources for OffsetFetchRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetFetchResponse> {
        use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestTopic, OffsetFetchRequestTopics};
        if version < 8 {
            let refused = |refusal: Refusal| OffsetFetchResponse::default().with_error_code(refusal.error);
            walk.one(Op::Describe, Res::Group, &mut self.group_id.0).map_err(refused)?;
            match self.topics.as_mut() {
                None => walk.listing(),
                Some(topics) => walk.topics(
                    topics,
                    Op::Describe,
                    |t: &mut OffsetFetchRequestTopic| TopicRef::name(&mut t.name.0),
                    |t| t.partition_indexes.clone(),
                ),
            }
            return Ok(());
        }
        walk.names(&mut self.groups, Op::Describe, Res::Group, |g| &mut g.group_id.0);
        for group in &mut self.groups {
            match group.topics.as_mut() {
                None => walk.listing(),
                Some(topics) => walk.within(group.group_id.0.clone(), |walk| {
                    walk.topics(
                        topics,
                        Op::Describe,
                        |t: &mut OffsetFetchRequestTopics| TopicRef::name(&mut t.name.0),
                        |t| t.partition_indexes.clone(),
                    )
                }),
            }
        }
        Ok(())
    }

    fn walk_answer(response: &mut OffsetFetchResponse, walk: &AnswerWalk<'_>) {
        walk.described(&mut response.topics, Res::Topic, |t| &mut t.name.0);
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            walk.described(&mut group.topics, Res::Topic, |t| &mut t.name.0);
        }
    }

    fn answer_refused(response: &mut OffsetFetchResponse, refused: Refused) {
        const TOPIC: i16 = code::TOPIC_AUTHORIZATION_FAILED;
        let groups = refused.names.into_iter();
        response.groups.extend(
            groups.map(|n| OffsetFetchResponseGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
        for t in refused.topics {
            match t.within {
                Some(group) => {
                    let partition = |p| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(TOPIC)
                    };
                    let answer = OffsetFetchResponseTopics::default()
                        .with_name(TopicName(t.name))
                        .with_partitions(t.partitions.into_iter().map(partition).collect());
                    if let Some(g) = response.groups.iter_mut().find(|g| g.group_id.0 == group) {
                        g.topics.push(answer);
                    }
                }
                None => {
                    let partition = |p| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(TOPIC)
                    };
                    let answer = OffsetFetchResponseTopic::default()
                        .with_name(TopicName(t.name))
                        .with_partitions(t.partitions.into_iter().map(partition).collect());
                    response.topics.push(answer);
                }
            }
        }
    }
}
