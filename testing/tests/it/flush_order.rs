//! An idempotent producer's records stay in the order sent, once each, whatever becomes of the
//! flushes that carry them: a failed flush holds back the producer's later requests, a resent
//! batch is answered as the duplicate it is, and a gap is refused.

use std::time::Duration;

use bytes::Bytes;
use floe_agent::record_batch::build::BatchProducer;
use floe_testing::{
    KafkaClient, PRODUCE_VERSION, TestAgent, TestOptions, decode_records, partition_answer, produce_request,
    producer_batch,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::ProduceRequest;

/// The counter of injected PUT and GET hangs.
const HUNG_REQUESTS: &str = "floe_object_store_injected_faults_total{kind=\"timeout\"}";
/// How long the first flush's PUT hangs before it fails: long enough for the later requests'
/// flushes to be uploaded behind it, as in the e2e test (which waited 6 s).
const FIRST_PUT_HANG: &str = "timeout=1,timeout-ms=1500";
/// Longest wait for an event a test polls for.
const EVENT_WAIT: Duration = Duration::from_secs(10);
/// What a request held behind its producer's failed one is told (`AppendError::EarlierSequenceFailed`).
const HELD: &str = "an earlier request of this producer to the partition failed";

/// Issue 51, finding 3. An idempotent producer sends five one-record requests to a partition
/// where metadata holds none of its sequences yet; the first one's flush hangs in its PUT and
/// fails after the four later ones were flushed and uploaded behind it. Metadata would take any
/// first sequence there, so committing the later four would leave a gap the first one's retry
/// could never fill. Instead the first is answered KAFKA_STORAGE_ERROR (56) and the four are
/// held back with the same retriable code, nothing is committed, and the producer's retry of
/// all five in order is committed at offsets 0 to 4, each record once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_holds_back_the_producers_later_requests_until_it_is_retried() {
    let floe = TestAgent::start(TestOptions { object_store_faults: true, ..TestOptions::default() }).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("held", 1).await;
    let (producer_id, producer_epoch) = kafka.init_producer_id(None).await;
    let request = |sequence: i32| {
        let producer = BatchProducer { producer_id, producer_epoch, base_sequence: sequence };
        produce_request("held", 0, producer_batch(&[sequence.to_string().as_str()], producer), -1)
    };

    let hung_before = floe.metric(HUNG_REQUESTS).await;
    floe.set_faults(FIRST_PUT_HANG);
    let first = kafka.send(&request(0), PRODUCE_VERSION).await;
    // The later requests must go into flushes of their own, uploaded without a fault: the
    // faults are lifted once the first flush's PUT has taken its hang.
    let hung = async {
        while floe.metric(HUNG_REQUESTS).await <= hung_before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(EVENT_WAIT, hung).await.expect("the first flush's PUT hangs");
    floe.set_faults("");
    let mut sent = vec![first];
    for sequence in 1..5 {
        sent.push(kafka.send(&request(sequence), PRODUCE_VERSION).await);
    }

    let answers = receive_produce_answers(&mut kafka, &sent).await;
    let storage_error = ResponseError::KafkaStorageError.code();
    let (error_code, base_offset, message) = &answers[0];
    assert_eq!((*error_code, *base_offset), (storage_error, -1), "the first request's PUT failed: {message}");
    assert!(!message.contains(HELD), "the first request failed itself: {message}");
    for (sequence, (error_code, base_offset, message)) in answers.iter().enumerate().skip(1) {
        assert_eq!((*error_code, *base_offset), (storage_error, -1), "sequence {sequence}: {message}");
        assert!(message.contains(HELD), "sequence {sequence} is held behind the first: {message}");
    }
    assert_eq!(kafka.end_offset("held", 0).await, 0, "nothing was committed");

    // The producer sends all five again, in order, as a client does after a retriable error.
    let mut resent = Vec::new();
    for sequence in 0..5 {
        resent.push(kafka.send(&request(sequence), PRODUCE_VERSION).await);
    }
    let answers = receive_produce_answers(&mut kafka, &resent).await;
    let committed: Vec<(i16, i64)> = answers.iter().map(|(code, offset, _)| (*code, *offset)).collect();
    assert_eq!(committed, (0..5).map(|offset| (0, offset)).collect::<Vec<_>>(), "{answers:?}");

    let fetched = kafka.fetch("held", 0, 0).await;
    assert_eq!((fetched.error_code, fetched.high_watermark), (0, 5));
    let stored: Vec<(i64, Option<Bytes>)> =
        decode_records(fetched.records.as_ref()).into_iter().map(|r| (r.offset, r.value)).collect();
    let sent_values: Vec<(i64, Option<Bytes>)> = (0..5).map(|i: i64| (i, Some(Bytes::from(i.to_string())))).collect();
    assert_eq!(stored, sent_values, "each record once, in the order sent");
    floe.shutdown().await;
}

/// Once metadata holds an idempotent producer's sequences on a partition, a batch sent again
/// (its answer lost, say) is answered with the offset it was first given and not appended
/// again, and a batch past the next sequence is refused retriably (NOT_ENOUGH_REPLICAS, 19:
/// "not persisted", without the epoch bump OUT_OF_ORDER_SEQUENCE_NUMBER makes a client do) until
/// the missing one arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_batch_gets_its_first_offset_and_a_sequence_gap_is_refused() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("sequenced", 1).await;
    let (producer_id, producer_epoch) = kafka.init_producer_id(None).await;
    let batch = |values: &[&str], sequence: i32| {
        producer_batch(values, BatchProducer { producer_id, producer_epoch, base_sequence: sequence })
    };

    let first = kafka.produce("sequenced", 0, batch(&["a", "b"], 0), -1).await.expect("answered");
    assert_eq!((first.error_code, first.base_offset), (0, 0), "{:?}", first.error_message);
    let second = kafka.produce("sequenced", 0, batch(&["c"], 2), -1).await.expect("answered");
    assert_eq!((second.error_code, second.base_offset), (0, 2), "{:?}", second.error_message);

    let again = kafka.produce("sequenced", 0, batch(&["a", "b"], 0), -1).await.expect("answered");
    assert_eq!((again.error_code, again.base_offset), (0, 0), "the duplicate: {:?}", again.error_message);
    assert_eq!(kafka.end_offset("sequenced", 0).await, 3, "the duplicate was not appended");

    let gap = kafka.produce("sequenced", 0, batch(&["f"], 5), -1).await.expect("answered");
    assert_eq!(gap.error_code, ResponseError::NotEnoughReplicas.code(), "{:?}", gap.error_message);
    assert_eq!(gap.base_offset, -1);
    let next = kafka.produce("sequenced", 0, batch(&["d"], 3), -1).await.expect("answered");
    assert_eq!((next.error_code, next.base_offset), (0, 3), "{:?}", next.error_message);

    let fetched = kafka.fetch("sequenced", 0, 0).await;
    let values: Vec<Option<Bytes>> = decode_records(fetched.records.as_ref()).into_iter().map(|r| r.value).collect();
    let expected: Vec<Option<Bytes>> = ["a", "b", "c", "d"].into_iter().map(|v| Some(Bytes::from(v))).collect();
    assert_eq!(values, expected);
    floe.shutdown().await;
}

/// The answers to the Produce requests `sent` (correlation ids) on `kafka`, in order: each one's
/// error code, base offset and error message.
async fn receive_produce_answers(kafka: &mut KafkaClient, sent: &[i32]) -> Vec<(i16, i64, String)> {
    let mut answers = Vec::with_capacity(sent.len());
    for &correlation_id in sent {
        let (answered, response) = kafka.recv::<ProduceRequest>(PRODUCE_VERSION).await;
        assert_eq!(answered, correlation_id, "answered in the order sent");
        let answer = partition_answer(response);
        let message = answer.error_message.as_deref().unwrap_or_default().to_owned();
        answers.push((answer.error_code, answer.base_offset, message));
    }
    answers
}
