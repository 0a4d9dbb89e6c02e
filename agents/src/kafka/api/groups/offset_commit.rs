//! OffsetCommit: a connection's commits, in the order they were read ([`CommitLane`]).

use super::*;
use floe_metadata::state::stored::each_into;

/// A connection's OffsetCommits, applied one after another in the order they were read, as a
/// Kafka coordinator handles one connection's requests, by a task of their own.
///
/// Commits waiting behind one being applied are merged into the next proposal (each partition
/// takes its latest offset, the proposal the latest stamp): the state is the one applying them
/// one by one would leave, and a client committing after every record (librdkafka pipelines
/// them) is kept up with. Applied one proposal each, a lane fell behind by thousands of
/// commits; the reader stopped at the connection's in-flight limit, and commits the client had
/// sent long before were read, and stamped, after the ones it sent again on a new connection.
///
/// After a commit fails retriably (the metadata leader died under it) the commits behind it
/// fail the same way, so the client retries them all, in order: applied, a later one would be
/// overwritten by the client's retry of the failed one. Clients give up such a connection
/// (librdkafka and Java mark the coordinator dead and reconnect), which ends the lane.
#[derive(Default)]
pub(in crate::kafka) struct CommitLane {
    queue: Option<mpsc::UnboundedSender<QueuedCommit>>,
    /// Set when the connection's reader ends: a commit the metadata leader has not taken by
    /// then is not sent again. The client resends what it had no answer to on its next
    /// connection, maybe to another agent, and this copy must not land after those.
    closed: Arc<AtomicBool>,
}

struct QueuedCommit {
    request: OffsetCommitRequest,
    stamp: CommitStamp,
    answer: oneshot::Sender<OffsetCommitResponse>,
}

/// Most commits merged into one proposal: bounds its size (a connection has at most
/// `CONNECTION_REQUESTS_IN_FLIGHT_MAX` requests queued anyway).
const COMMITS_MERGED_MAX: usize = 256;

impl CommitLane {
    /// Queues `request`, stamped in read order, behind the connection's earlier commits. The
    /// queue needs no bound of its own: each entry is one of the connection's in-flight requests.
    pub(in crate::kafka) fn submit(
        &mut self,
        agent: &Arc<Agent>,
        request: OffsetCommitRequest,
        stamp: CommitStamp,
    ) -> impl std::future::Future<Output = OffsetCommitResponse> + Send + 'static {
        let partitions = request_partitions(&request);
        let (answer, answered) = oneshot::channel();
        let queue = self.queue.get_or_insert_with(|| {
            let (queue, commits) = mpsc::unbounded_channel();
            tokio::spawn(run_lane(agent.clone(), commits, self.closed.clone()));
            queue
        });
        let _ = queue.send(QueuedCommit { request, stamp, answer });
        async move {
            // A lane that ended without answering (its task failed) is a coordinator fault.
            answered.await.unwrap_or_else(|_| {
                offset_commit_answer(partitions, Err(ResponseError::CoordinatorNotAvailable.code()))
            })
        }
    }
}

impl Drop for CommitLane {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// Errors after which the client sends the commit again: the commits behind it must fail too.
fn retried_by_client(code: i16) -> bool {
    [
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::RequestTimedOut,
    ]
    .iter()
    .any(|e| e.code() == code)
}

async fn run_lane(agent: Arc<Agent>, mut commits: mpsc::UnboundedReceiver<QueuedCommit>, closed: Arc<AtomicBool>) {
    let mut failed: Option<i16> = None;
    let mut held: Option<QueuedCommit> = None;
    loop {
        let first = match held.take() {
            Some(commit) => commit,
            None => match commits.recv().await {
                Some(commit) => commit,
                None => return,
            },
        };
        let mut batch = vec![first];
        while batch.len() < COMMITS_MERGED_MAX {
            match commits.try_recv() {
                Ok(next) if mergeable(&batch[0].request, &next.request) => batch.push(next),
                Ok(next) => {
                    held = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        let outcome = match failed {
            Some(code) => Err(code),
            None => apply_merged(&agent, &batch, &closed).await,
        };
        if let Err(code) = outcome
            && retried_by_client(code)
        {
            failed = Some(code);
        }
        for commit in batch {
            let partitions = request_partitions(&commit.request);
            let codes = match &outcome {
                Err(code) => Err(*code),
                Ok(codes) => Ok(partitions
                    .iter()
                    .map(|key| codes.get(key).copied().unwrap_or(ResponseError::UnknownServerError.code()))
                    .collect()),
            };
            let _ = commit.answer.send(offset_commit_answer(partitions, codes));
        }
    }
}

/// Whether `next` may join a proposal started by `first`: the same member of the same group,
/// and no metadata the state machine would refuse (that commit's own error must be reported).
fn mergeable(first: &OffsetCommitRequest, next: &OffsetCommitRequest) -> bool {
    let small = |r: &OffsetCommitRequest| {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.committed_metadata.as_ref().is_none_or(|m| m.len() <= floe_metadata::OFFSET_METADATA_BYTES_MAX))
    };
    first.group_id == next.group_id
        && first.generation_id_or_member_epoch == next.generation_id_or_member_epoch
        && first.member_id == next.member_id
        && first.group_instance_id == next.group_instance_id
        && small(first)
        && small(next)
}

/// A request's partitions, in request order.
fn request_partitions(request: &OffsetCommitRequest) -> Vec<(TopicName, i32)> {
    request.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.clone(), p.partition_index))).collect()
}

/// The offsets `requests` commit, in order, as one commit: each partition once (where it
/// first appears) with the offset of the last request naming it; with each one's key.
fn merged_offsets<'a>(
    requests: impl Iterator<Item = &'a OffsetCommitRequest>,
) -> (Vec<OffsetCommit>, Vec<(TopicName, i32)>) {
    let mut offsets: Vec<OffsetCommit> = Vec::new();
    let mut keys: Vec<(TopicName, i32)> = Vec::new();
    let mut position: std::collections::HashMap<(TopicName, i32), usize> = std::collections::HashMap::new();
    for request in requests {
        for topic in &request.topics {
            for p in &topic.partitions {
                let offset = OffsetCommit {
                    topic: topic.name.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(ToString::to_string).unwrap_or_default(),
                };
                let key = (topic.name.clone(), p.partition_index);
                match position.get(&key) {
                    Some(&i) => offsets[i] = offset,
                    None => {
                        position.insert(key.clone(), offsets.len());
                        offsets.push(offset);
                        keys.push(key);
                    }
                }
            }
        }
    }
    (offsets, keys)
}

/// Applies `batch` as one commit: each partition's offset from the last request naming it,
/// under the last request's stamp. Answers a code per partition, or one code for all.
async fn apply_merged(
    agent: &Agent,
    batch: &[QueuedCommit],
    closed: &AtomicBool,
) -> Result<std::collections::HashMap<(TopicName, i32), i16>, i16> {
    let (offsets, keys) = merged_offsets(batch.iter().map(|c| &c.request));
    let (Some(first), Some(last)) = (batch.first(), batch.last()) else { return Ok(Default::default()) };
    if offsets.is_empty() {
        return Ok(Default::default());
    }
    let request = &first.request;
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id.clone()),
    };
    let stamp = last.stamp;
    let merged = match batch.len() {
        1 => "1",
        2..=16 => "2-16",
        _ => "17+",
    };
    crate::metrics::OFFSET_COMMIT_PROPOSALS.with_label_values(&[merged]).inc();
    // While the metadata leader changes the commit is sent again, under the same stamp (a first
    // copy that lands after all is then skipped), rather than failed: librdkafka resends a
    // failed commit after the commits sent behind it, and the older offset would win.
    let deadline = tokio::time::Instant::now() + CONFIRMED_READ_WAIT;
    loop {
        let request_copy = GroupRequest::CommitOffsets {
            member: member.clone(),
            offsets: each_into(offsets.clone()),
            stamp: stamp.into(),
        };
        let result = ask(agent, request_copy, |r| match r {
            GroupResponse::CommitOffsets(result) => Some(result),
            _ => None,
        })
        .await
        .and_then(|r| r);
        match &result {
            Ok(results) => return Ok(keys.into_iter().zip(results.iter().map(error_code)).collect()),
            Err(e) => {
                let code = for_group(e).code();
                let late = tokio::time::Instant::now() + CONFIRMED_READ_RETRY_PAUSE >= deadline;
                if !retried_by_client(code) || late || closed.load(Ordering::Acquire) {
                    return Err(code);
                }
                tracing::debug!(error = %e, "offset commit not applied yet; sending it again");
                tokio::time::sleep(CONFIRMED_READ_RETRY_PAUSE).await;
            }
        }
    }
}

/// The response for `partitions` (in request order): a code per partition, or one for all.
fn offset_commit_answer(partitions: Vec<(TopicName, i32)>, codes: Result<Vec<i16>, i16>) -> OffsetCommitResponse {
    let codes: Vec<i16> = match codes {
        Ok(codes) => codes,
        Err(code) => vec![code; partitions.len()],
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
    for ((name, partition), code) in partitions.into_iter().zip(codes) {
        let entry = OffsetCommitResponsePartition::default().with_partition_index(partition).with_error_code(code);
        match topics.last_mut() {
            Some(t) if t.name == name => t.partitions.push(entry),
            _ => topics.push(OffsetCommitResponseTopic::default().with_name(name).with_partitions(vec![entry])),
        }
    }
    OffsetCommitResponse::default().with_topics(topics)
}

fn offset_commit_refusals(topics: impl Iterator<Item = RefusedTopic>, error: i16) -> Vec<OffsetCommitResponseTopic> {
    topics
        .map(|t| {
            let partitions = t.partitions.into_iter();
            OffsetCommitResponseTopic::default().with_name(TopicName(t.name)).with_topic_id(t.id).with_partitions(
                partitions
                    .map(|p| OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(error))
                    .collect(),
            )
        })
        .collect()
}

impl KafkaApi for OffsetCommitRequest {
    const VERSIONS: (i16, i16) = (2, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        // Stamped here, in request order: the handler tasks may start in any order (tokio runs
        // the newest spawned task first), and the state machine skips a commit whose stamp is
        // older than one it applied.
        let answer = cx.lane.submit(cx.agent, self, next_commit_stamp());
        cx.later(move |_, _| async move { ResponseKind::OffsetCommit(answer.await) })
    }
}

impl Resources for OffsetCommitRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetCommitResponse> {
        if let Err(refusal) = walk.one(Op::Read, Res::Group, &mut self.group_id.0) {
            let topics = self.topics.iter().map(|t| RefusedTopic {
                name: t.name.0.clone(),
                id: t.topic_id,
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                within: None,
            });
            return Err(OffsetCommitResponse::default().with_topics(offset_commit_refusals(topics, refusal.error)));
        }
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::with_id(&mut t.name.0, &mut t.topic_id),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut OffsetCommitResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut OffsetCommitResponse, refused: Refused) {
        let topics = offset_commit_refusals(refused.topics.into_iter(), code::TOPIC_AUTHORIZATION_FAILED);
        response.topics.extend(topics);
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};

    use super::*;

    fn commit(member: &str, offsets: &[(&str, i32, i64)]) -> OffsetCommitRequest {
        let mut request = OffsetCommitRequest::default()
            .with_group_id(GroupId(str_bytes("g".to_owned())))
            .with_member_id(str_bytes(member.to_owned()));
        for (topic, partition, offset) in offsets {
            let p =
                OffsetCommitRequestPartition::default().with_partition_index(*partition).with_committed_offset(*offset);
            match request.topics.last_mut() {
                Some(t) if &*t.name.0 == *topic => t.partitions.push(p),
                _ => request.topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes((*topic).to_owned())))
                        .with_partitions(vec![p]),
                ),
            }
        }
        request
    }

    #[test]
    fn merged_commits_leave_each_partition_at_its_last_offset() {
        let requests =
            [commit("m", &[("a", 0, 5), ("a", 1, 7)]), commit("m", &[("a", 0, 6)]), commit("m", &[("b", 0, 1)])];
        let (offsets, keys) = merged_offsets(requests.iter());
        let got: Vec<_> = offsets.iter().map(|o| (o.topic.as_str(), o.partition, o.offset)).collect();
        assert_eq!(got, [("a", 0, 6), ("a", 1, 7), ("b", 0, 1)]);
        assert_eq!(keys.len(), 3);
    }

    #[test]
    fn only_one_members_commits_with_small_metadata_are_merged() {
        let first = commit("m", &[("a", 0, 1)]);
        assert!(mergeable(&first, &commit("m", &[("a", 1, 1)])));
        assert!(!mergeable(&first, &commit("other", &[("a", 0, 2)])));
        let mut large = commit("m", &[("a", 0, 2)]);
        large.topics[0].partitions[0].committed_metadata =
            Some(str_bytes("x".repeat(floe_metadata::OFFSET_METADATA_BYTES_MAX + 1)));
        assert!(!mergeable(&first, &large), "its own OFFSET_METADATA_TOO_LARGE must reach it");
    }
}
