//! Heartbeat: keeps a classic member's session, and tells it of a rebalance.

use super::*;

pub(in crate::kafka) async fn heartbeat(agent: &Agent, request: HeartbeatRequest) -> HeartbeatResponse {
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
    };
    let result = ask(agent, GroupRequest::Heartbeat(member), |r| match r {
        GroupResponse::Heartbeat(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    HeartbeatResponse::default().with_error_code(error_code(&result))
}

impl KafkaApi for HeartbeatRequest {
    const VERSIONS: (i16, i16) = (0, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::Heartbeat(heartbeat(&agent, self).await) })
    }
}

impl Resources for HeartbeatRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), HeartbeatResponse> {
        let refused = |refusal: Refusal| HeartbeatResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut HeartbeatResponse, _walk: &AnswerWalk<'_>) {}
}
