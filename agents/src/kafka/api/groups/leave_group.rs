//! LeaveGroup: members (one, or a batch from v3) leave at once.

use super::*;

pub(in crate::kafka) async fn leave(agent: &Agent, version: i16, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let members: Vec<LeavingMember> = if version >= 3 {
        request
            .members
            .into_iter()
            .map(|m| LeavingMember { member_id: m.member_id.to_string(), instance_id: opt(m.group_instance_id) })
            .collect()
    } else {
        vec![LeavingMember { member_id: request.member_id.to_string(), instance_id: None }]
    };
    let group_id = request.group_id.to_string();
    let result = ask(agent, GroupRequest::Leave { group_id, members }, |r| match r {
        GroupResponse::Leave(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    match result {
        Err(e) => LeaveGroupResponse::default().with_error_code(for_group(&e).code()),
        Ok(results) if version < 3 => {
            LeaveGroupResponse::default().with_error_code(results.first().map_or(0, |(_, r)| error_code(r)))
        }
        Ok(results) => LeaveGroupResponse::default().with_members(
            results
                .into_iter()
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(m.instance_id.map(str_bytes))
                        .with_error_code(error_code(&r))
                })
                .collect(),
        ),
    }
}

impl KafkaApi for LeaveGroupRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::LeaveGroup(leave(&agent, version, self).await) })
    }
}

impl Resources for LeaveGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), LeaveGroupResponse> {
        let refused = |refusal: Refusal| LeaveGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut LeaveGroupResponse, _walk: &AnswerWalk<'_>) {}
}
