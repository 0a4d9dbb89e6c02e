use bytes::Bytes;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::protocol::Encodable;
use proptest::prelude::*;

use super::*;

const CONN: u64 = 1;
const V12: i16 = 12;
const V16: i16 = 16;

fn topic_id(name: &str) -> Uuid {
    Uuid::from_u128(name.bytes().fold(7u128, |h, b| h * 31 + u128::from(b)))
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// A fetch of `partitions` (topic, partition, offset) in session `id` at `epoch`, with the
/// limits a Java client asks for.
fn fetch(version: i16, id: i32, epoch: i32, partitions: &[(&str, i32, i64)]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for &(topic, partition, offset) in partitions {
        if topics.last().is_none_or(|t| t.topic.0.as_str() != topic) {
            let t = FetchTopic::default().with_topic(if version >= 13 { TopicName::default() } else { name(topic) });
            topics.push(t.with_topic_id(topic_id(topic)));
        }
        let p = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1024 * 1024);
        if let Some(t) = topics.last_mut() {
            t.partitions.push(p);
        }
    }
    // Topic ids at v13+ leave the name empty; the grouping above keys on the name, so patch it.
    if version >= 13 {
        for t in &mut topics {
            t.topic = TopicName::default();
        }
    }
    FetchRequest::default()
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

fn forget(mut request: FetchRequest, version: i16, partitions: &[(&str, i32)]) -> FetchRequest {
    for &(topic, partition) in partitions {
        let name = if version >= 13 { TopicName::default() } else { name(topic) };
        let t =
            ForgottenTopic::default().with_topic(name).with_topic_id(topic_id(topic)).with_partitions(vec![partition]);
        request.forgotten_topics_data.push(t);
    }
    request
}

/// The partitions a request asks for, as (topic key, partition, offset).
fn asked(request: &FetchRequest) -> Vec<(String, i32, i64)> {
    let key = |t: &FetchTopic| if t.topic.0.is_empty() { t.topic_id.to_string() } else { t.topic.0.to_string() };
    request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (key(t), p.partition, p.fetch_offset)))
        .collect()
}

/// The Fetch handler's answer to `request`: every partition at high watermark `hw(partition)`,
/// with `records` bytes of records where given.
fn answer(request: &FetchRequest, hw: impl Fn(i32) -> i64, records: &[i32]) -> FetchResponse {
    let topics = request.topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            let data = if records.contains(&p.partition) { Bytes::from_static(b"batch") } else { Bytes::new() };
            PartitionData::default()
                .with_partition_index(p.partition)
                .with_high_watermark(hw(p.partition))
                .with_last_stable_offset(hw(p.partition))
                .with_log_start_offset(0)
                .with_records(Some(data))
        });
        FetchableTopicResponse::default()
            .with_topic(t.topic.clone())
            .with_topic_id(t.topic_id)
            .with_partitions(partitions.collect())
    });
    FetchResponse::default().with_responses(topics.collect())
}

fn answered(response: &FetchResponse) -> Vec<i32> {
    response.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.partition_index)).collect()
}

/// Opens a session over `partitions` of topic `t` and answers its full fetch; its id.
fn open(sessions: &FetchSessions, version: i16, partitions: &[i32], now: Instant) -> i32 {
    let list: Vec<_> = partitions.iter().map(|&p| ("t", p, 0)).collect();
    let mut request = fetch(version, 0, 0, &list);
    let ticket = sessions
        .begin(CONN, None, version, &mut request, &ChangedPartitions::default(), now)
        .unwrap()
        .expect("a session");
    let mut response = answer(&request, |_| 10, &[]);
    sessions.finish(ticket, &mut response);
    assert_eq!(answered(&response), partitions, "a full answer lists every partition");
    assert_ne!(response.session_id, 0);
    response.session_id
}

/// Sends an incremental fetch and answers it; the partitions that reached the client.
fn next(
    sessions: &FetchSessions,
    request: &mut FetchRequest,
    hw: impl Fn(i32) -> i64,
    records: &[i32],
) -> FetchResponse {
    let ticket = sessions
        .begin(CONN, None, V12, request, &ChangedPartitions::default(), Instant::now())
        .unwrap()
        .expect("the session goes on");
    let mut response = answer(request, hw, records);
    sessions.finish(ticket, &mut response);
    response
}

#[test]
fn sessionless_fetches_stay_sessionless() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let now = Instant::now();
    // librdkafka's every fetch, and any version before sessions.
    let mut librdkafka = fetch(V12, 0, -1, &[("t", 0, 0)]);
    assert!(sessions.begin(CONN, None, V12, &mut librdkafka, &ChangedPartitions::default(), now).unwrap().is_none());
    let mut old = fetch(6, 0, 0, &[("t", 0, 0)]);
    assert!(sessions.begin(CONN, None, 6, &mut old, &ChangedPartitions::default(), now).unwrap().is_none());
    assert_eq!(asked(&librdkafka), vec![("t".into(), 0, 0)], "the request is left alone");
    assert_eq!(sessions.usage(None).0, Usage::default());
    // Slots 0 turns sessions off.
    let off = FetchSessions::new(FetchSessionBounds::with_slots(0));
    assert!(
        off.begin(CONN, None, V12, &mut fetch(V12, 0, 0, &[("t", 0, 0)]), &ChangedPartitions::default(), now)
            .unwrap()
            .is_none()
    );
}

#[test]
fn an_incremental_fetch_answers_only_what_changed() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2], Instant::now());
    // Nothing changed: the client names nothing and hears nothing.
    let mut request = fetch(V12, id, 1, &[]);
    let response = next(&sessions, &mut request, |_| 10, &[]);
    assert_eq!(asked(&request).len(), 3, "expanded to the whole session");
    assert_eq!(response.session_id, id);
    assert!(answered(&response).is_empty());
    // Records in 1, a high watermark moved in 2.
    let response = next(&sessions, &mut fetch(V12, id, 2, &[]), |p| if p == 2 { 11 } else { 10 }, &[1]);
    assert_eq!(answered(&response), vec![1, 2]);
    // The client moves partition 1 on; the session keeps its new offset for later fetches.
    let mut request = fetch(V12, id, 3, &[("t", 1, 5)]);
    let response = next(&sessions, &mut request, |p| if p == 2 { 11 } else { 10 }, &[]);
    assert!(answered(&response).is_empty());
    assert!(asked(&request).contains(&("t".into(), 1, 5)));
    let mut request = fetch(V12, id, 4, &[]);
    next(&sessions, &mut request, |_| 10, &[]);
    assert!(asked(&request).contains(&("t".into(), 1, 5)), "the offset is remembered");
}

#[test]
fn new_partitions_and_errors_are_answered_until_they_settle() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0], Instant::now());
    // A partition joins: it appears once, then only when it changes.
    let response = next(&sessions, &mut fetch(V12, id, 1, &[("t", 1, 0)]), |_| 10, &[]);
    assert_eq!(answered(&response), vec![1]);
    assert!(answered(&next(&sessions, &mut fetch(V12, id, 2, &[]), |_| 10, &[])).is_empty());
    // An error is always answered, and the partition is answered again once it clears.
    let mut request = fetch(V12, id, 3, &[]);
    let ticket =
        sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap().unwrap();
    let mut response = answer(&request, |_| 10, &[]);
    response.responses[0].partitions[0] = PartitionData::default().with_partition_index(0).with_error_code(1);
    sessions.finish(ticket, &mut response);
    assert_eq!(answered(&response), vec![0]);
    assert_eq!(answered(&next(&sessions, &mut fetch(V12, id, 4, &[]), |_| 10, &[])), vec![0]);
    assert!(answered(&next(&sessions, &mut fetch(V12, id, 5, &[]), |_| 10, &[])).is_empty());
}

#[test]
fn forgotten_partitions_leave_and_an_empty_session_closes() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2], Instant::now());
    // Named in both lists: removed, as Kafka applies the forgotten list last.
    let mut request = forget(fetch(V12, id, 1, &[("t", 2, 3)]), V12, &[("t", 1), ("t", 2)]);
    next(&sessions, &mut request, |_| 10, &[]);
    assert_eq!(asked(&request), vec![("t".into(), 0, 0)]);
    assert_eq!(sessions.usage(None).0, Usage { sessions: 1, partitions: 1 });
    let mut request = forget(fetch(V12, id, 2, &[]), V12, &[("t", 0)]);
    assert!(
        sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap().is_none()
    );
    assert_eq!(sessions.usage(None).0, Usage::default());
}

#[test]
fn each_session_error_has_its_code_and_keeps_what_it_should() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let now = Instant::now();
    let id = open(&sessions, V12, &[0], now);
    let begin = |conn, tenant, version, epoch| {
        let mut request = fetch(version, id, epoch, &[]);
        sessions
            .begin(conn, tenant, version, &mut request, &ChangedPartitions::default(), now)
            .map(|t| t.map(|t| t.full))
    };
    assert_eq!(begin(CONN, None, V12, 5).err(), Some(FetchSessionError::InvalidEpoch { got: 5, expected: 1 }));
    assert_eq!(begin(CONN + 1, None, V12, 1).err(), Some(FetchSessionError::NotFound(id)), "another connection");
    assert_eq!(begin(CONN, Some("other"), V12, 1).err(), Some(FetchSessionError::NotFound(id)), "another tenant");
    assert_eq!(begin(CONN, None, V16, 1).err(), Some(FetchSessionError::TopicIdUsage { opened_with_ids: false }));
    // None of those harmed the session.
    assert_eq!(begin(CONN, None, V12, 1), Ok(Some(false)));
    // A pipelined duplicate of epoch 1 is refused: the epoch has moved on.
    assert_eq!(begin(CONN, None, V12, 1).err(), Some(FetchSessionError::InvalidEpoch { got: 1, expected: 2 }));
    // Another connection cannot close it either.
    let mut close = fetch(V12, id, -1, &[("t", 0, 0)]);
    assert!(sessions.begin(CONN + 1, None, V12, &mut close, &ChangedPartitions::default(), now).unwrap().is_none());
    assert_eq!(sessions.usage(None).0.sessions, 1);
    assert!(sessions.begin(CONN, None, V12, &mut close, &ChangedPartitions::default(), now).unwrap().is_none());
    assert_eq!(sessions.usage(None).0.sessions, 0);
    assert_eq!(begin(CONN, None, V12, 2).err(), Some(FetchSessionError::NotFound(id)));
}

#[test]
fn a_full_fetch_naming_its_session_replaces_it() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let now = Instant::now();
    let id = open(&sessions, V12, &[0, 1], now);
    let mut again = fetch(V12, id, 0, &[("t", 0, 0)]);
    let ticket = sessions.begin(CONN, None, V12, &mut again, &ChangedPartitions::default(), now).unwrap().unwrap();
    assert!(ticket.full);
    assert_ne!(ticket.session.id, id);
    assert_eq!(sessions.usage(None).0, Usage { sessions: 1, partitions: 1 });
}

#[test]
fn sessions_by_topic_id_work_the_same() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V16, &[0, 1], Instant::now());
    let mut request = fetch(V16, id, 1, &[]);
    let ticket =
        sessions.begin(CONN, None, V16, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap().unwrap();
    let mut response = answer(&request, |p| if p == 1 { 11 } else { 10 }, &[]);
    sessions.finish(ticket, &mut response);
    assert_eq!(answered(&response), vec![1]);
    assert_eq!(response.responses[0].topic_id, topic_id("t"));
    let mut old = fetch(V12, id, 2, &[]);
    let refused = sessions.begin(CONN, None, V12, &mut old, &ChangedPartitions::default(), Instant::now()).err();
    assert_eq!(refused, Some(FetchSessionError::TopicIdUsage { opened_with_ids: true }));
}

#[test]
fn partitions_that_returned_records_rotate_to_the_back() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2], Instant::now());
    // With room for one batch, the first partition with data answers; it then goes last.
    let mut reached = Vec::new();
    for epoch in 1..=3 {
        let mut request = fetch(V12, id, epoch, &[]).with_max_bytes(5);
        let ticket = sessions
            .begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now())
            .unwrap()
            .unwrap();
        let first_in_session = request.topics[0].partitions[0].partition;
        let mut response = answer(&request, |_| 10, &[first_in_session]);
        sessions.finish(ticket, &mut response);
        reached.push(first_in_session);
    }
    assert_eq!(reached, vec![0, 1, 2], "every partition had its turn");
}

#[test]
fn partitions_that_returned_records_go_to_the_back_in_their_order() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2, 3, 4], Instant::now());
    let mut order = Vec::new();
    for (epoch, with_records) in [(1, &[1, 3][..]), (2, &[0, 1][..]), (3, &[][..])] {
        let mut request = fetch(V12, id, epoch, &[]).with_max_bytes(1024 * 1024);
        let ticket = sessions
            .begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now())
            .unwrap()
            .unwrap();
        order.push(request.topics[0].partitions.iter().map(|p| p.partition).collect::<Vec<_>>());
        let mut response = answer(&request, |_| 10, with_records);
        sessions.finish(ticket, &mut response);
    }
    assert_eq!(order, vec![vec![0, 1, 2, 3, 4], vec![0, 2, 4, 1, 3], vec![2, 4, 3, 0, 1]]);
}

/// Rotation is for partitions left short: an answer in which every partition without records
/// had none to read (its high watermark at its fetch offset) keeps the session's order; one in
/// which a partition had records to read and got none (its batch passed its limit behind
/// another's records) sends those that returned records to the back, so that it comes first.
#[test]
fn only_an_answer_that_left_a_partition_short_changes_the_session_order() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2, 3], Instant::now());
    let mut order = Vec::new();
    // Partitions 0 and 2 return records; 1 and 3 are read to their end (high watermark 0).
    let at_end = |p: i32| if p % 2 == 0 { 10 } else { 0 };
    for epoch in 1..=3 {
        let mut request = fetch(V12, id, epoch, &[]);
        let ticket = sessions
            .begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now())
            .unwrap()
            .unwrap();
        order.push(request.topics[0].partitions.iter().map(|p| p.partition).collect::<Vec<_>>());
        let mut response = answer(&request, at_end, &[0, 2]);
        sessions.finish(ticket, &mut response);
    }
    assert_eq!(order, vec![vec![0, 1, 2, 3]; 3]);

    // Partition 1 has records past its fetch offset and got none.
    let mut request = fetch(V12, id, 4, &[]);
    let ticket = sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap();
    let mut response = answer(&request, |p| if p == 3 { 0 } else { 10 }, &[0, 2]);
    sessions.finish(ticket.expect("the session goes on"), &mut response);
    let mut request = fetch(V12, id, 5, &[]);
    sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap();
    assert_eq!(asked(&request).iter().map(|p| p.1).collect::<Vec<_>>(), vec![1, 3, 0, 2], "partition 1 first");
}

#[test]
fn an_answer_in_another_order_than_the_session_is_still_filtered_per_partition() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0, 1, 2, 3], Instant::now());
    let mut request = fetch(V12, id, 1, &[]);
    let ticket =
        sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), Instant::now()).unwrap().unwrap();
    // Partition 2's high watermark moved; the answer lists the partitions backwards.
    let mut response = answer(&request, |p| if p == 2 { 11 } else { 10 }, &[]);
    response.responses[0].partitions.reverse();
    sessions.finish(ticket, &mut response);
    assert_eq!(answered(&response), vec![2]);
}

#[test]
fn the_epoch_wraps_to_one() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V12, &[0], Instant::now());
    if let Some(entry) = sessions.lock().entries.get(&id) {
        entry.session.lock().epoch = i32::MAX;
    }
    next(&sessions, &mut fetch(V12, id, i32::MAX, &[]), |_| 10, &[]);
    next(&sessions, &mut fetch(V12, id, 1, &[]), |_| 10, &[]);
}

#[test]
fn a_closed_connection_frees_its_sessions_and_a_parked_fetch_still_answers() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let now = Instant::now();
    let id = open(&sessions, V12, &[0, 1], now);
    let mut request = fetch(V12, id, 1, &[]);
    let ticket = sessions.begin(CONN, None, V12, &mut request, &ChangedPartitions::default(), now).unwrap().unwrap();
    sessions.close_connection(CONN);
    assert_eq!(sessions.usage(None).0, Usage::default());
    let mut response = answer(&request, |_| 10, &[]);
    sessions.finish(ticket, &mut response);
    assert_eq!(response.session_id, 0, "the client is told the session is gone");
    assert_eq!(answered(&response), vec![0, 1], "and hears about every partition");
}

#[test]
fn a_connection_holds_two_sessions_and_a_third_replaces_its_oldest() {
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let start = Instant::now();
    let first = open(&sessions, V12, &[0], start);
    let second = open(&sessions, V12, &[1], start + Duration::from_secs(1));
    let third = open(&sessions, V12, &[2], start + Duration::from_secs(2));
    let cache = sessions.lock();
    assert!(!cache.entries.contains_key(&first));
    assert!(cache.entries.contains_key(&second) && cache.entries.contains_key(&third));
}

fn open_as(sessions: &FetchSessions, conn: u64, tenant: Option<&str>, size: usize, now: Instant) -> Option<i32> {
    let list: Vec<_> = (0..size as i32).map(|p| ("t", p, 0)).collect();
    let mut request = fetch(V12, 0, 0, &list);
    let ticket = sessions.begin(conn, tenant, V12, &mut request, &ChangedPartitions::default(), now).unwrap()?;
    let mut response = answer(&request, |_| 10, &[]);
    sessions.finish(ticket, &mut response);
    Some(response.session_id).filter(|&id| id != 0)
}

#[test]
fn a_tenant_cannot_take_another_tenants_live_sessions() {
    let bounds = FetchSessionBounds { slots: 8, tenant_slots: 4, ..FetchSessionBounds::default() };
    let sessions = FetchSessions::new(bounds);
    let start = Instant::now();
    for conn in 0..4 {
        assert!(open_as(&sessions, conn, Some("victim"), 10, start).is_some());
    }
    // The hostile tenant fills its share, then is refused rather than evicting live sessions.
    for conn in 10..14 {
        assert!(open_as(&sessions, conn, Some("hostile"), 10, start).is_some());
    }
    assert!(open_as(&sessions, 20, Some("hostile"), 10, start).is_none(), "past its own share");
    assert_eq!(sessions.usage(Some("victim")).1.sessions, 4);
    // Its own stale session makes room for it.
    let later = start + Duration::from_secs(121);
    assert!(open_as(&sessions, 21, Some("hostile"), 10, later).is_some());
    assert_eq!(sessions.usage(Some("hostile")).1.sessions, 4);
    assert_eq!(sessions.usage(Some("victim")).1.sessions, 4);
}

#[test]
fn an_idle_incremental_answer_for_a_thousand_partitions_is_tiny() {
    for version in [V12, V16] {
        let sessions = FetchSessions::new(FetchSessionBounds::default());
        let id = open(&sessions, version, &(0..1000).collect::<Vec<_>>(), Instant::now());
        let mut request = fetch(version, id, 1, &[]);
        let ticket = sessions
            .begin(CONN, None, version, &mut request, &ChangedPartitions::default(), Instant::now())
            .unwrap()
            .unwrap();
        let mut full = answer(&request, |_| 10, &[]);
        let mut bytes = bytes::BytesMut::new();
        full.encode(&mut bytes, version).unwrap();
        let before = bytes.len();
        sessions.finish(ticket, &mut full);
        let mut bytes = bytes::BytesMut::new();
        full.encode(&mut bytes, version).unwrap();
        assert!(bytes.len() < 64, "v{version}: {} bytes (a full answer is {before})", bytes.len());
        let mut request = fetch(version, id, 2, &[]);
        let mut small = bytes::BytesMut::new();
        fetch(version, id, 2, &[]).encode(&mut small, version).unwrap();
        assert!(small.len() < 64, "v{version}: an idle incremental request is {} bytes", small.len());
        sessions
            .begin(CONN, None, version, &mut request, &ChangedPartitions::default(), Instant::now())
            .unwrap()
            .unwrap();
    }
}

#[derive(Clone, Debug)]
enum Op {
    Open { conn: u64, tenant: u8, size: usize },
    Continue { conn: u64, add: usize, forget: usize },
    CloseConnection(u64),
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..12u64, 0..3u8, 1..40usize).prop_map(|(conn, tenant, size)| Op::Open { conn, tenant, size }),
        (0..12u64, 0..5usize, 0..5usize).prop_map(|(conn, add, forget)| Op::Continue { conn, add, forget }),
        (0..12u64).prop_map(Op::CloseConnection),
        (0..200u64).prop_map(Op::Wait),
    ]
}

proptest! {
    #[test]
    fn bounds_hold_and_live_sessions_of_other_tenants_survive(ops in proptest::collection::vec(op(), 1..120)) {
        let bounds = FetchSessionBounds {
            slots: 6, partitions: 120, tenant_slots: 3, tenant_partitions: 60, ..FetchSessionBounds::default()
        };
        let sessions = FetchSessions::new(bounds);
        let tenants = [None, Some("a"), Some("b")];
        let mut now = Instant::now();
        // The session each connection last opened and its next epoch, as a client keeps them.
        let mut clients: HashMap<u64, (i32, i32, Option<&str>)> = HashMap::new();
        let mut last_used: HashMap<i32, (Instant, Option<&str>)> = HashMap::new();
        for op in ops {
            let existed: HashSet<i32> = sessions.lock().entries.keys().copied().collect();
            let before: HashMap<i32, (Instant, Option<&str>)> =
                last_used.iter().filter(|(id, _)| existed.contains(id)).map(|(&id, &used)| (id, used)).collect();
            let mut opener = None;
            match op {
                Op::Open { conn, tenant, size } => {
                    let tenant = tenants[tenant as usize];
                    // A connection belongs to one tenant: use its own if it has one.
                    let tenant = clients.get(&conn).map_or(tenant, |c| c.2);
                    opener = Some(tenant);
                    if let Some(id) = open_as(&sessions, conn, tenant, size, now) {
                        clients.insert(conn, (id, 1, tenant));
                        last_used.insert(id, (now, tenant));
                    }
                }
                Op::Continue { conn, add, forget: n } => {
                    if let Some(&(id, epoch, tenant)) = clients.get(&conn) {
                        let adds: Vec<_> = (0..add as i32).map(|p| ("u", p, 0)).collect();
                        let forgets: Vec<_> = (0..n as i32).map(|p| ("t", p)).collect();
                        let mut request = forget(fetch(V12, id, epoch, &adds), V12, &forgets);
                        match sessions.begin(conn, tenant, V12, &mut request, &ChangedPartitions::default(), now) {
                            Ok(Some(ticket)) => {
                                let mut response = answer(&request, |_| 10, &[]);
                                sessions.finish(ticket, &mut response);
                                clients.insert(conn, (id, epoch + 1, tenant));
                                last_used.insert(id, (now, tenant));
                            }
                            Ok(None) | Err(_) => {
                                clients.remove(&conn);
                            }
                        }
                    }
                }
                Op::CloseConnection(conn) => {
                    sessions.close_connection(conn);
                    clients.remove(&conn);
                }
                Op::Wait(secs) => now += Duration::from_secs(secs),
            }
            let cache = sessions.lock();
            // The counters equal what the maps hold, and no bound is passed.
            let mut total = Usage::default();
            let mut by_tenant: HashMap<Option<Arc<str>>, Usage> = HashMap::new();
            for entry in cache.entries.values() {
                let size = entry.session.lock().partitions.len();
                prop_assert_eq!(size, entry.partitions);
                total.sessions += 1;
                total.partitions += size;
                let t = by_tenant.entry(entry.session.tenant.clone()).or_default();
                t.sessions += 1;
                t.partitions += size;
            }
            prop_assert_eq!(total, cache.total);
            prop_assert_eq!(&by_tenant, &cache.by_tenant);
            prop_assert_eq!(cache.last_used.len(), cache.entries.len());
            prop_assert!(total.sessions <= bounds.slots && total.partitions <= bounds.partitions);
            for (tenant, used) in &by_tenant {
                if tenant.is_some() {
                    prop_assert!(used.sessions <= bounds.tenant_slots && used.partitions <= bounds.tenant_partitions);
                }
            }
            // An opener never removed another tenant's session used within `stale_after`.
            if let Some(opener) = opener {
                for (id, (used, tenant)) in &before {
                    let live = now.saturating_duration_since(*used) < bounds.stale_after;
                    let closed_by_its_client = !clients.values().any(|c| c.0 == *id);
                    if live && *tenant != opener && !closed_by_its_client {
                        prop_assert!(cache.entries.contains_key(id), "live session {} of {:?} evicted", id, tenant);
                    }
                }
            }
            drop(cache);
            last_used.retain(|id, _| clients.values().any(|c| c.0 == *id));
        }
    }
}

#[test]
fn told_offsets_take_no_more_slots_than_allowed() {
    let (topic, mark) = (TopicId::from_u128(1), Mark::of_partition(&floe_metadata::Partition::default()));
    let mut told = Told::default();
    told.set(topic, 9, Some(mark), 16);
    assert_eq!(told.topic(topic).len(), 10);
    // The last partition of a large topic would take a million slots: not recorded.
    told.set(topic, 999_999, Some(mark), 16);
    assert_eq!(told.topic(topic).len(), 10, "not recorded past the slots allowed");
    told.set(topic, 3, None, 16);
    assert_eq!(told.topic(topic)[3], None);
    told.set(topic, -1, Some(mark), 16);
    told.clear();
    assert!(told.topic(topic).is_empty());
}

/// Topic "t" of `partitions` partitions, under the id the requests name it by.
fn state_with_topic(partitions: i32) -> floe_metadata::State {
    let mut state = floe_metadata::State::default();
    let create = floe_metadata::Command::CreateTopic {
        name: "t".into(),
        topic_id: topic_id("t"),
        partition_count: partitions,
        configs: Default::default(),
    };
    state.apply(1, create).expect("topic");
    state
}

/// Begins the session's fetch at `epoch` naming `named`, as of `state`; the partitions its
/// request asks for, and its ticket.
fn begin_by_id(
    sessions: &FetchSessions,
    state: &floe_metadata::State,
    id: i32,
    epoch: i32,
    named: &[(&str, i32, i64)],
) -> (Vec<i32>, Ticket) {
    let mut request = fetch(V16, id, epoch, named);
    let ticket = sessions.begin(CONN, None, V16, &mut request, &state.changed, Instant::now()).unwrap().unwrap();
    (request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.partition)).collect(), ticket)
}

/// Finishes a fetch whose handler answered `answered` (at high watermark 10, no records) and
/// left `left_out` out as told and unmoved.
fn finish_by_id(sessions: &FetchSessions, ticket: Ticket, answered: &[i32], left_out: &[i32]) {
    ticket.view().left_out(left_out.iter().map(|&p| (topic_id("t"), p)).collect());
    let list: Vec<_> = answered.iter().map(|&p| ("t", p, 10)).collect();
    let mut response = answer(&fetch(V16, 0, 0, &list), |_| 10, &[]);
    sessions.finish(ticket, &mut response);
}

/// Issue 53: a session by topic id leaves quiet partitions out of the request only while
/// nothing could change their answer. A partition left out is quiet only if the session's kept
/// waiter watches it; it is read again once the client names it, once the waiter says it moved
/// (taken when the next fetch begins), once the waiter is replaced, and every partition is
/// read again after a change of ACLs; a fetch that began before another sets none quiet.
#[test]
fn quiet_partitions_leave_the_request_until_something_could_change_their_answer() {
    let mut state = state_with_topic(4);
    let wakeups = Arc::new(crate::fetch::wakeups::PartitionWakeups::default());
    let sessions = FetchSessions::new(FetchSessionBounds::default());
    let id = open(&sessions, V16, &[0, 1, 2, 3], Instant::now());
    let all: Vec<i32> = (0..4).collect();

    // Its first long poll registers partitions 0 to 2 (3 could not be read then).
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 1, &[]);
    assert_eq!(asked, all);
    let watched = (0..3).map(|p| (topic_id("t"), p));
    ticket.view().told().lock().keep_waiter(Arc::new(wakeups.wait_on(&state, watched)));
    finish_by_id(&sessions, ticket, &[], &all);
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 2, &[]);
    assert_eq!(asked, vec![3], "left out and watched: quiet; 3 is not watched");
    assert!(ticket.view().quiet_watcher().is_some(), "the handler must wait on the kept waiter");
    finish_by_id(&sessions, ticket, &[3], &[]);

    let (asked, ticket) = begin_by_id(&sessions, &state, id, 3, &[("t", 1, 10)]);
    assert_eq!(asked, vec![1, 3], "named by the client");
    finish_by_id(&sessions, ticket, &[1, 3], &[]);

    // Partition 2 moves between two fetches: the next one takes the move and reads it.
    let partition = &mut state.topics.get_mut(&topic_id("t")).expect("topic").partitions[2];
    std::sync::Arc::make_mut(partition).next_offset = 11;
    wakeups.compare(&state);
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 4, &[]);
    assert_eq!(asked, vec![1, 2, 3]);
    finish_by_id(&sessions, ticket, &[1, 2, 3], &[]);

    // A fetch that began before another marks nothing quiet: the later one took moves since.
    let (_, early) = begin_by_id(&sessions, &state, id, 5, &[]);
    let (_, late) = begin_by_id(&sessions, &state, id, 6, &[]);
    finish_by_id(&sessions, early, &[3], &[1, 2]);
    finish_by_id(&sessions, late, &[1, 2, 3], &[]);
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 7, &[]);
    assert_eq!(asked, vec![1, 2, 3]);
    finish_by_id(&sessions, ticket, &[3], &[1, 2]);
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 8, &[]);
    assert_eq!(asked, vec![3]);
    finish_by_id(&sessions, ticket, &[3], &[]);

    // An ACL changes: every partition is read (and authorized) again.
    let deny = floe_metadata::acl::AclBinding {
        resource_type: floe_metadata::acl::AclResourceType::Topic,
        resource_name: "t".into(),
        pattern_type: floe_metadata::acl::AclPatternType::Literal,
        principal: "User:mallory".into(),
        host: "*".into(),
        operation: floe_metadata::acl::AclOperation::Read,
        permission: floe_metadata::acl::AclPermission::Deny,
    };
    let bindings = floe_metadata::state::stored::each_into(vec![deny]);
    state.apply(2, floe_metadata::Command::CreateAcls { tenant: String::new(), bindings }).expect("acl");
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 9, &[]);
    assert_eq!(asked, all, "ACLs changed");
    finish_by_id(&sessions, ticket, &[3], &[0, 1, 2]);
    let (asked, ticket) = begin_by_id(&sessions, &state, id, 10, &[]);
    assert_eq!(asked, vec![3]);

    // Another waiter kept: the quiet partitions were set under the one it replaced.
    ticket.view().told().lock().keep_waiter(Arc::new(wakeups.wait_on(&state, [(topic_id("t"), 0)])));
    finish_by_id(&sessions, ticket, &[3], &[]);
    let (asked, _) = begin_by_id(&sessions, &state, id, 11, &[]);
    assert_eq!(asked, all, "the waiter was replaced");
}
