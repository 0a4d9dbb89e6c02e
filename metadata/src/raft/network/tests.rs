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
    // The peer holds its answer to the first request until told, and says when it has sent it.
    let (received_tx, received) = tokio::sync::oneshot::channel::<()>();
    let (release, release_rx) = tokio::sync::oneshot::channel::<()>();
    let (answered_tx, answered) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut first = Some((received_tx, release_rx, answered_tx));
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let first = first.take();
            tokio::spawn(async move {
                let mut first = first;
                while let Ok(Some(Request::Vote(request))) = read_frame::<Request>(&mut stream).await {
                    let term = request.vote.leader_id().term;
                    let answer = Response::Vote(Ok(VoteResponse::new(Vote::new(term, 1), None, true)));
                    if let Some((received, release, answered)) = first.take() {
                        let _ = received.send(());
                        let _ = release.await;
                        let _ = write_frame(&mut stream, &answer).await;
                        let _ = answered.send(());
                        continue;
                    }
                    if write_frame(&mut stream, &answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut client = PeerClient::new(addr);
    let first = vote_request(1);
    {
        // The first call is dropped once the peer has its request, before the answer comes.
        let call = client.call(&first, Duration::from_secs(5));
        tokio::select! {
            _ = call => panic!("the first call was answered before its peer was told to answer"),
            _ = received => {}
        }
    }
    let _ = release.send(());
    let _ = answered.await;
    let answer = client.call(&vote_request(2), Duration::from_secs(5)).await.expect("second call");
    assert_eq!(answered_term(answer), 2, "the second call got the first call's answer");
}

/// Each role of the metadata port's certificates may send its own requests only.
#[test]
fn roles_may_send_their_own_requests_only() {
    use crate::tls::Role;
    let token = |t: &str| t == "the-token";
    let tenant = || Command::CreateTenant { name: "acme".into(), now_ms: 0 };
    let heartbeat = || Command::DeleteTopic { name: "t".into() };
    let (peer, agent, operator) = (Role::Peer(1), Role::Agent(1), Role::Operator("alice".into()));
    let anywhere = |c| Request::ProposeAnywhere(c, NotAfter(None));
    let relayed = |c, t: &str| Request::ProposeAsOperator(c, NotAfter(None), t.to_owned());

    // Raft itself: peers only.
    for role in [&agent, &operator] {
        assert!(!vote_request(1).allowed(role, token), "{role:?} may not vote");
    }
    assert!(vote_request(1).allowed(&peer, token));
    // Data-plane proposals: agents and operators, not peers (they forward checked ones).
    assert!(anywhere(heartbeat()).allowed(&agent, token));
    assert!(anywhere(heartbeat()).allowed(&operator, token));
    assert!(!anywhere(heartbeat()).allowed(&peer, token));
    // Tenants and membership: operators, or an agent with the operator token.
    assert!(!anywhere(tenant()).allowed(&agent, token));
    assert!(anywhere(tenant()).allowed(&operator, token));
    assert!(relayed(tenant(), "the-token").allowed(&agent, token));
    assert!(!relayed(tenant(), "a-guess").allowed(&agent, token));
    assert!(!Request::AddVoter(4, "x:1".into()).allowed(&agent, token));
    assert!(Request::AddVoter(4, "x:1".into()).allowed(&operator, token));
    assert!(!Request::AddVoter(4, "x:1".into()).allowed(&peer, token));
    // Everyone may ask for the status; refusals say why where the response can.
    for role in [&peer, &agent, &operator] {
        assert!(Request::Status.allowed(role, token));
    }
    assert!(matches!(
        anywhere(tenant()).refusal(&agent),
        Some(Response::ProposeAnywhere(Ok((CommandResponse(Err(crate::command::CommandError::NotAuthorized(_))), 0))))
    ));
    assert!(vote_request(1).refusal(&agent).is_none(), "a refused Raft call closes the connection");
}
