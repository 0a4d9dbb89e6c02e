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

/// A change stream from a node of an older format is read in that format: an agent upgraded
/// before the metadata nodes follows them.
#[tokio::test]
async fn a_state_copy_is_read_in_the_format_its_node_writes() {
    let archive = include_bytes!("../../../tests/golden/state-v5.snap");
    let expected = crate::archive::decode_state(archive).expect("the golden state decodes");
    // Response::StateCopy is variant 6; its body is the state as format 5 encoded it.
    let mut payload = vec![6u8];
    payload.extend_from_slice(&archive[12..]);
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);

    let read = read_frame_in::<Response>(&mut &frame[..], 5).await.expect("reads");
    match read {
        Some(Response::StateCopy(state)) => assert_eq!(crate::State::from(*state), expected),
        other => panic!("unexpected frame {other:?}"),
    }
    let as_today = read_frame::<Response>(&mut &frame[..]).await;
    assert!(
        !matches!(as_today, Ok(Some(Response::StateCopy(ref s))) if crate::State::from((**s).clone()) == expected),
        "format 5 read as today's format should not give the same state (the test would prove nothing)"
    );
}

/// A node of protocol 0 closes a connection whose first request it cannot read; the asker dials
/// again and knows it as such.
#[tokio::test]
async fn a_node_before_hello_is_dialled_again_and_known_as_such() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        // First connection: one frame read as bytes (an old node fails to decode it), then closed.
        let Ok((mut first, _)) = listener.accept().await else { return };
        let length = first.read_u32().await.expect("length");
        let mut payload = vec![0; length as usize];
        first.read_exact(&mut payload).await.expect("payload");
        drop(first);
        let Ok((mut second, _)) = listener.accept().await else { return };
        while let Ok(Some(request)) = read_frame::<Request>(&mut second).await {
            let answer = match request {
                Request::Clock => Response::Clock(42),
                _ => return,
            };
            if write_frame(&mut second, &answer).await.is_err() {
                return;
            }
        }
    });
    let (mut stream, hello) = dial_with_hello(&addr, Duration::from_secs(5)).await.expect("dials");
    assert_eq!(hello, Hello::before_hello());
    write_frame(&mut stream, &Request::Clock).await.expect("write");
    assert!(matches!(read_frame::<Response>(&mut stream).await, Ok(Some(Response::Clock(42)))));
}

#[test]
fn a_node_serves_change_streams_to_readers_of_its_format_or_newer() {
    let node = Hello::this_process();
    let newer = Hello { format: node.format + 1, ..node.clone() };
    let older = Hello { format: node.format - 1, ..node.clone() };
    assert!(node.cannot_serve(&node).is_none());
    assert!(node.cannot_serve(&newer).is_none());
    let why = node.cannot_serve(&older).expect("an older reader is refused");
    assert!(why.contains(&format!("up to {}", older.format)) && why.contains("upgrade agents before"), "{why}");
    // Protocol 0 wrote format 6 at most, which today's node writes too.
    assert!(Hello::before_hello().format <= crate::FORMAT_VERSION);
}
