//! The peer client against a scripted peer.

use std::time::Duration;

use openraft::Vote;
use openraft::raft::{VoteRequest, VoteResponse};
use tokio::net::TcpListener;

use super::*;

fn vote_request(term: u64) -> Request {
    Request::Vote(VoteRequest::new(Vote::new(term, 1), None))
}

fn answered_term(response: Response) -> u64 {
    match response {
        Response::Vote(Ok(r)) => r.vote.leader_id().term,
        other => panic!("unexpected response {other:?}"),
    }
}

/// A call dropped before its answer arrived (openraft times replication calls out itself) must
/// not leave that answer to be read as the next call's: a stale AppendEntries success would count
/// entries as replicated that the follower never got.
#[tokio::test]
async fn a_call_dropped_half_way_leaves_no_answer_for_the_next() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                while let Ok(Some(Request::Vote(request))) = read_frame::<Request>(&mut stream).await {
                    let term = request.vote.leader_id().term;
                    if term == 1 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let answer = VoteResponse::new(Vote::new(term, 1), None, true);
                    if write_frame(&mut stream, &Response::Vote(Ok(answer))).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut client = PeerClient::new(addr);
    let first = vote_request(1);
    let slow = tokio::time::timeout(Duration::from_millis(50), client.call(&first, Duration::from_secs(5)));
    assert!(slow.await.is_err(), "the first call is dropped before its answer");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let answer = client.call(&vote_request(2), Duration::from_secs(5)).await.expect("second call");
    assert_eq!(answered_term(answer), 2, "the second call got the first call's answer");
}
