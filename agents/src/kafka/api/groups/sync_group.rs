//! SyncGroup: the leader's assignment handed out for the generation.

use super::*;

pub(in crate::kafka) async fn sync(agent: &Agent, version: i16, request: SyncGroupRequest) -> SyncGroupResponse {
    let sync = SyncRequest {
        group_id: request.group_id.to_string(),
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
        protocol_type: opt(request.protocol_type),
        protocol: opt(request.protocol_name),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let result = ask(agent, GroupRequest::Sync(sync), |r| match r {
        GroupResponse::Sync(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    match result {
        Ok(answer) => {
            let response = SyncGroupResponse::default().with_assignment(answer.assignment.into());
            if version >= 5 {
                response
                    .with_protocol_type(answer.protocol_type.map(str_bytes))
                    .with_protocol_name(answer.protocol.map(str_bytes))
            } else {
                response
            }
        }
        Err(e) => SyncGroupResponse::default().with_error_code(for_group(&e).code()),
    }
}

impl KafkaApi for SyncGroupRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::SyncGroup(sync(&agent, version, self).await) })
    }
}

impl Resources for SyncGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), SyncGroupResponse> {
        let refused = |refusal: Refusal| SyncGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut SyncGroupResponse, _walk: &AnswerWalk<'_>) {}
}
