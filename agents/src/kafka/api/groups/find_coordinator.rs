//! FindCoordinator: every agent can coordinate every group and transactional id (by
//! forwarding); each key is given one agent of the client's zone, the same whoever is asked.

use super::*;

/// FindCoordinator key types: consumer groups and transactions (2, share groups, is not served).
const KEY_TYPE_GROUP: i8 = 0;

const KEY_TYPE_TRANSACTION: i8 = 1;

/// Every agent can coordinate every group (by forwarding); each key is given one of them.
pub(in crate::kafka) fn find_coordinator(
    agent: &Agent,
    version: i16,
    request: FindCoordinatorRequest,
    hints: &crate::membership::ClientHints,
) -> FindCoordinatorResponse {
    let served = matches!(request.key_type, KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION);
    let error = (!served).then_some(ResponseError::InvalidRequest);
    let message = error.map(|_| str_bytes("only group (0) and transaction (1) coordinators are served"));
    let this = agent.info();
    // Groups are consumers' business, transactions producers'.
    let pool = crate::membership::client_pool(&agent.metadata.read(), agent, hints);
    let agents = if request.key_type == KEY_TYPE_TRANSACTION {
        crate::membership::with_roles(&pool.local, |r| r.produce)
    } else {
        crate::membership::with_roles(&pool.local, |r| r.fetch)
    };
    // Any agent can coordinate any key; naming the same one whoever is asked keeps a client
    // on one coordinator connection, whose requests this agent then reads in order.
    let coordinator = |key: &str| crate::membership::coordinator(&agents, key).unwrap_or(&this).clone();
    if version < 4 {
        let chosen = coordinator(&request.key);
        let response = FindCoordinatorResponse::default()
            .with_error_code(error.map_or(0, |e| e.code()))
            .with_node_id(BrokerId(if error.is_some() { -1 } else { chosen.agent_id }))
            .with_host(str_bytes(if error.is_some() { String::new() } else { chosen.host }))
            .with_port(if error.is_some() { -1 } else { i32::from(chosen.port) });
        return if version >= 1 { response.with_error_message(message) } else { response };
    }
    let coordinators = request
        .coordinator_keys
        .into_iter()
        .map(|key| match error {
            Some(e) => Coordinator::default()
                .with_key(key)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(e.code())
                .with_error_message(message.clone()),
            None => {
                let chosen = coordinator(&key);
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(chosen.agent_id))
                    .with_host(str_bytes(chosen.host))
                    .with_port(i32::from(chosen.port))
            }
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

impl KafkaApi for FindCoordinatorRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        let response = find_coordinator(cx.agent, cx.version(), self, &cx.hints());
        Reply::Now(Box::new(ResponseKind::FindCoordinator(response)))
    }
}

impl Resources for FindCoordinatorRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), FindCoordinatorResponse> {
        let resource_type = if self.key_type == KEY_TYPE_TRANSACTION { Res::TransactionalId } else { Res::Group };
        // A key only picks an agent: checked, never scoped.
        if version < 4 {
            walk.key(Op::Describe, resource_type, &self.key).map_err(|refusal| {
                let answer = FindCoordinatorResponse::default().with_error_code(refusal.error);
                answer.with_node_id(BrokerId(-1)).with_port(-1)
            })
        } else {
            walk.keys(&mut self.coordinator_keys, Op::Describe, resource_type, |k| k);
            Ok(())
        }
    }

    fn walk_answer(_response: &mut FindCoordinatorResponse, _walk: &AnswerWalk<'_>) {}

    fn answer_refused(response: &mut FindCoordinatorResponse, refused: Refused) {
        response.coordinators.extend(refused.names.into_iter().map(|n| {
            Coordinator::default().with_key(n.name).with_node_id(BrokerId(-1)).with_port(-1).with_error_code(n.error)
        }));
    }
}
